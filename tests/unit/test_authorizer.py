"""nimbus/authorizer.py: Storm's SimpleACLAuthorizer rules as a decision table."""

import pytest

from event_table import play
from squall.client.errors import ConfigError, PermissionDenied
from squall.client.tls import Principal
from squall.nimbus.authorizer import Authorizer, TopologyAcl

CONF = {"nimbus.admins": ["root"], "nimbus.admins.groups": ["wheel"],
        "nimbus.supervisor.users": ["supervisor"], "nimbus.daemon.users": ["nimbus"],
        "nimbus.users": ["alice", "bob", "carol", "dave"]}
ACL = TopologyAcl.of("wc", "alice", {"topology.users": ["bob"], "topology.groups": ["ops"]})

alice, bob, carol, dave = (Principal("alice"), Principal("bob"),
                           Principal("carol", frozenset({"ops"})), Principal("dave"))
root, admin_by_group = Principal("root"), Principal("erin", frozenset({"wheel"}))
supervisor, nimbus, mallory = Principal("supervisor"), Principal("nimbus"), Principal("mallory")


def test_decisions():
    authz = Authorizer(CONF)
    play(lambda row: authz.permits(*row), [
        # user verbs: nimbus.users (set here), admins, daemons read the cluster
        (("submitTopology", alice), True),
        (("submitTopology", mallory), False),
        (("submitTopology", supervisor), False),
        (("fileUpload", dave), True),
        (("getClusterInfo", supervisor), True),
        (("getClusterInfo", mallory), False),
        # topology verbs: owner, topology.users, topology.groups, admins
        (("killTopology", alice, ACL), True),
        (("killTopology", bob, ACL), True),
        (("killTopology", carol, ACL), True),
        (("killTopology", dave, ACL), False),
        (("rebalance", root, ACL), True),
        (("rebalance", admin_by_group, ACL), True),
        (("killTopology", supervisor, ACL), False),   # daemons only read
        (("getUserTopology", supervisor, ACL), True),
        (("getTopologyConf", nimbus, ACL), True),
        (("getTopologyInfo", dave, ACL), False),
        (("getTopologyLogs", bob, ACL), True),
        (("getTopologyLogs", carol, ACL), True),
        (("getTopologyLogs", dave, ACL), False),
        (("getTopologyLogs", supervisor, ACL), False),
        # daemon verbs
        (("sendSupervisorWorkerHeartbeats", supervisor), True),
        (("sendSupervisorWorkerHeartbeats", alice), False),
        (("fileDownload", nimbus), True),
        (("fileDownload", alice), False),
        (("getTopologyConfSecrets", supervisor), True),
        (("getTopologyConfSecrets", alice), False),
        (("getTopologyConfSecrets", root), True),
    ])


def test_without_nimbus_users_any_authenticated_principal_may_submit():
    authz = Authorizer({k: v for k, v in CONF.items() if k != "nimbus.users"})
    assert authz.permits("submitTopology", mallory)


def test_authorizer_none_allows_everything_and_unknown_ones_are_refused():
    assert Authorizer({"nimbus.authorizer": "none"}).permits("killTopology", mallory, ACL)
    assert Authorizer({"nimbus.authorizer":
                       "org.apache.storm.security.auth.authorizer.SimpleACLAuthorizer"}).enabled
    with pytest.raises(ConfigError, match="unknown authorizer 'acl'"):
        Authorizer({"nimbus.authorizer": "acl"})


def test_refusals_name_the_verb_the_principal_and_the_topology():
    authz = Authorizer(CONF)
    with pytest.raises(PermissionDenied, match="dave may not killTopology topology wc: it is "
                                               "owned by alice"):
        authz.check("killTopology", dave, ACL)
    with pytest.raises(PermissionDenied, match="mallory may not submitTopology: not in "
                                               "nimbus.users"):
        authz.check("submitTopology", mallory)
    with pytest.raises(PermissionDenied, match="alice may not fileDownload: only supervisors"):
        authz.check("fileDownload", alice)


def test_the_acl_is_read_only_when_the_decision_needs_it():
    authz = Authorizer(CONF)
    reads = []

    def acl():
        reads.append(1)
        return ACL
    authz.check("killTopology", root, acl)          # admin: no lookup
    authz.check("getUserTopology", supervisor, acl)  # daemon read: no lookup
    assert reads == []
    authz.check("killTopology", bob, acl)
    assert reads == [1]


def test_a_stored_acl_of_anything_but_names_locks_nobody_out():
    """A conf stored before submit checked the ACL's shape (`topology.users: [{}]` made every
    call on the topology INTERNAL, even an admin's): its names still count, the rest not."""
    acl = TopologyAcl.of("wc", "alice", {"topology.users": [{}, "bob", 7],
                                         "topology.groups": {"ops": 1}})
    assert acl.users == frozenset({"bob"}) and acl.groups == frozenset()
    authz = Authorizer(CONF)
    play(lambda row: authz.permits(*row), [
        (("killTopology", root, acl), True),
        (("killTopology", alice, acl), True),
        (("killTopology", bob, acl), True),
        (("killTopology", carol, acl), False),
    ])
