"""Who may do what at Nimbus: Storm's ``SimpleACLAuthorizer``, as a pure decision.

Verbs keep Storm's operation names. The rules, as Storm's:

* admins (``nimbus.admins``, members of ``nimbus.admins.groups``) may do everything;
* user verbs (upload, submit, the cluster summary): anyone authenticated, or only
  ``nimbus.users`` when that is set;
* topology verbs (kill, (de)activate, rebalance, its conf, info and code, log levels,
  profiling and debug sampling): the topology's owner, its ``topology.users`` and members
  of its ``topology.groups``;
* daemon verbs (worker heartbeats, package downloads, a conf with its secrets): the
  supervisors of ``nimbus.supervisor.users`` and the Nimbuses of ``nimbus.daemon.users``,
  which may also read any topology (to run it, or to copy it as a follower).

A refusal is :class:`PermissionDenied` naming the verb, the principal and the topology.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..client import config as cfg
from ..client.errors import ConfigError, PermissionDenied
from ..client.tls import Principal

USER_VERBS = frozenset({"fileUpload", "submitTopology", "getClusterInfo", "getLeader"})
TOPOLOGY_VERBS = frozenset({"killTopology", "activate", "deactivate", "rebalance",
                            "getTopologyConf", "getTopologyInfo", "getUserTopology",
                            "setLogConfig",
                            # A worker's log (the logviewer, issue 12, asks with this verb).
                            "getTopologyLogs",
                            # Profiling and debug sampling (Storm's verbs): a thread dump
                            # or a sampled tuple shows the topology's data, so the same
                            # people as kill and rebalance.
                            "setWorkerProfiler", "getComponentPendingProfileActions",
                            "debug"})
DAEMON_VERBS = frozenset({"fileDownload", "sendSupervisorWorkerHeartbeats",
                          "getTopologyConfSecrets"})
#: User verbs daemons may use whatever nimbus.users says (a supervisor finds the leader).
CLUSTER_READS = frozenset({"getClusterInfo", "getLeader"})
#: Topology verbs daemons may use on any topology (never kill or rebalance).
DAEMON_READS = frozenset({"getTopologyConf", "getTopologyInfo", "getUserTopology"})


@dataclass(frozen=True)
class TopologyAcl:
    """Who may manage one topology: its owner, ``topology.users``, ``topology.groups``."""

    name: str
    owner: str
    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    @classmethod
    def of(cls, name: str, owner: str, conf: Mapping[str, Any]) -> "TopologyAcl":
        # Names only: a conf stored before submit checked its ACL's shape (``[{}]``) must
        # not lock everyone, admins included, out of the topology.
        def names(key: str) -> frozenset[str]:
            value = conf.get(key)
            return frozenset(x for x in value if isinstance(x, str)) \
                if isinstance(value, list) else frozenset()
        return cls(name, owner, names(cfg.TOPOLOGY_USERS), names(cfg.TOPOLOGY_GROUPS))


class Authorizer:
    """``nimbus.authorizer: simple`` (the default); ``none`` allows every authenticated call."""

    def __init__(self, conf: Mapping[str, Any]):
        kind = str(cfg.get(conf, cfg.NIMBUS_AUTHORIZER)).lower()
        if kind in ("simple", "org.apache.storm.security.auth.authorizer.simpleaclauthorizer"):
            self.enabled = True
        elif kind == "none":
            self.enabled = False
        else:
            raise ConfigError(cfg.NIMBUS_AUTHORIZER, f"unknown authorizer {kind!r}; use simple "
                                                     "or none")
        self.admins = frozenset(cfg.get(conf, cfg.NIMBUS_ADMINS) or ())
        self.admin_groups = frozenset(cfg.get(conf, cfg.NIMBUS_ADMINS_GROUPS) or ())
        users = cfg.get(conf, cfg.NIMBUS_USERS)
        self.users = None if users is None else frozenset(users)
        self.daemons = frozenset(cfg.get(conf, cfg.NIMBUS_SUPERVISOR_USERS) or ()) | \
            frozenset(cfg.get(conf, cfg.NIMBUS_DAEMON_USERS) or ())

    def is_admin(self, p: Principal) -> bool:
        return p.name in self.admins or bool(p.groups & self.admin_groups)

    def is_daemon(self, p: Principal) -> bool:
        return p.name in self.daemons

    def permits(self, verb: str, p: Principal, acl: TopologyAcl | None = None) -> bool:
        if not self.enabled or self.is_admin(p):
            return True
        if verb in DAEMON_VERBS:
            return self.is_daemon(p)
        if verb in USER_VERBS:
            return self.users is None or p.name in self.users or \
                (self.is_daemon(p) and verb in CLUSTER_READS)
        if verb in TOPOLOGY_VERBS:
            if verb in DAEMON_READS and self.is_daemon(p):
                return True
            return acl is not None and (p.name == acl.owner or p.name in acl.users
                                        or bool(p.groups & acl.groups))
        raise ValueError(f"unknown verb {verb!r}")

    def _needs_acl(self, verb: str, p: Principal) -> bool:
        return self.enabled and verb in TOPOLOGY_VERBS and not self.is_admin(p) and \
            not (verb in DAEMON_READS and self.is_daemon(p))

    def check(self, verb: str, p: Principal,
              acl: TopologyAcl | Callable[[], TopologyAcl] | None = None) -> None:
        """Raise PermissionDenied unless ``p`` may ``verb``; ``acl`` may be a callable, read
        only when the decision needs it (admins and daemons skip the lookup)."""
        if callable(acl):
            acl = acl() if self._needs_acl(verb, p) else None
        if self.permits(verb, p, acl):
            return
        if verb in DAEMON_VERBS:
            who = f"{cfg.NIMBUS_SUPERVISOR_USERS} or {cfg.NIMBUS_DAEMON_USERS}"
            raise PermissionDenied(f"{p} may not {verb}: only supervisors and Nimbuses may "
                                   f"({who})")
        if verb in USER_VERBS:
            raise PermissionDenied(f"{p} may not {verb}: not in {cfg.NIMBUS_USERS}")
        assert acl is not None
        raise PermissionDenied(f"{p} may not {verb} topology {acl.name}: it is owned by "
                               f"{acl.owner}, and {p} is in neither its {cfg.TOPOLOGY_USERS} "
                               f"nor its {cfg.TOPOLOGY_GROUPS} nor {cfg.NIMBUS_ADMINS}")
