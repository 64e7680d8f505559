"""Who Squall is in ZooKeeper, and which digest ACLs the nodes it creates carry.

Storm's ``Utils.getWorkerACL`` and ``ZookeeperAuthInfo`` for the ``digest`` scheme. Three
identities, chosen by :func:`identity` from a conf:

* the cluster (daemons): ``storm.zookeeper.auth.payload`` (``user:password``); every node
  it creates gets ``digest:<user>:<hash> ALL``;
* a topology (its workers, for Trident's transactional state):
  ``storm.zookeeper.topology.auth.payload``, derived by :func:`topology_payload` from the
  cluster's password and the topology name, so workers never hold the cluster's password.
  Its nodes get its own digest ALL plus ``storm.zookeeper.superACL`` ALL (the cluster's
  digest id, so daemons and admins can clean up);
* open: neither set, world ACLs as before.

Example::

    p = topology_payload("squall:s3cret", "wc")   # "topology-wc:<hex HMAC>"
    identity({"storm.zookeeper.auth.payload": "squall:s3cret"}).acl
    # [ACL(perms=31, id=Id(scheme='digest', id='squall:<base64 sha1>'))]
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import quote

from kazoo.security import ACL, Id, Permissions, make_digest_acl, make_digest_acl_credential

from . import config as cfg
from .errors import ConfigError

#: Storm's key for the daemons' ``scheme:id`` that gets ALL on a topology's nodes; set for
#: workers by :func:`worker_auth` (never a password: a digest id is a hash).
SUPER_ACL = "storm.zookeeper.superACL"
SCHEME = "digest"  #: the one scheme Squall supports


@dataclass(frozen=True)
class Identity:
    """What a kazoo client authenticates with and the ACL of the nodes it creates."""

    kind: str  #: "cluster", "topology" or "open"
    auth_data: tuple[tuple[str, str], ...] = ()
    acl: tuple[ACL, ...] = ()  #: empty when open (ZooKeeper's world ALL)
    payload: str | None = None  #: the cluster's payload (to derive topology grants)


def split_payload(payload: Any, key: str = cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD) -> tuple[str, str]:
    """``(user, password)`` of a ``user:password`` payload, else :class:`ConfigError`."""
    user, sep, password = str(payload).partition(":")
    if not isinstance(payload, str) or not sep or not user or not password:
        raise ConfigError(key, "expected user:password")
    return user, password


def digest_id(payload: str) -> str:
    """The ACL id of a payload: ``user:<base64 sha1(user:password)>``, safe to share."""
    return make_digest_acl_credential(*split_payload(payload))


def topology_payload(cluster_payload: str, topology_name: str, owner: str = "") -> str:
    """``topology-<name>:<hex HMAC-SHA256(cluster password, owner NUL name)>``:
    deterministic, so a topology its owner resubmits under its name reads its old
    transactional state, while another user's topology of the same name (after a kill) and
    every other topology cannot compute it. The name is %-quoted (ASCII only, no ``:``)."""
    _, password = split_payload(cluster_payload)
    mac = hmac.new(password.encode(), f"{owner}\0{topology_name}".encode(),
                   hashlib.sha256).hexdigest()
    return f"topology-{quote(topology_name, safe='')}:{mac}"


def _check_scheme(conf: Mapping[str, Any], key: str) -> None:
    scheme = cfg.get(conf, key)
    if scheme != SCHEME:
        raise ConfigError(key, f"only {SCHEME} is supported, got {scheme!r}")


def identity(conf: Mapping[str, Any]) -> Identity:
    """The identity a conf gives: the cluster's payload wins over a topology's."""
    cluster = conf.get(cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD)
    if cluster is not None:
        _check_scheme(conf, cfg.STORM_ZOOKEEPER_AUTH_SCHEME)
        user, password = split_payload(cluster)
        return Identity("cluster", ((SCHEME, cluster),),
                        (make_digest_acl(user, password, all=True),), cluster)
    topo = conf.get(cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_PAYLOAD)
    if topo is None:
        return Identity("open")
    _check_scheme(conf, cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_SCHEME)
    user, password = split_payload(topo, cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_PAYLOAD)
    scheme, _, super_id = str(conf.get(SUPER_ACL) or "").partition(":")
    if not scheme or not super_id:
        raise ConfigError(SUPER_ACL, "expected scheme:id (digest:user:hash) beside "
                          f"{cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_PAYLOAD}")
    acl = (make_digest_acl(user, password, all=True), ACL(Permissions.ALL, Id(scheme, super_id)))
    return Identity("topology", ((SCHEME, topo),), acl)


def topology_acl(cluster_payload: str, topology_name: str, owner: str = "",
                 perms: int = Permissions.CREATE) -> ACL:
    """An ACL entry for a topology's identity. The default, CREATE, is its grant on the
    transactional root: it may create its states there, but not list (READ) the others'."""
    return ACL(perms, Id(SCHEME, digest_id(topology_payload(cluster_payload, topology_name,
                                                            owner))))


def worker_auth(conf: Mapping[str, Any], topology_name: str | None,
                owner: str = "") -> dict[str, Any]:
    """The auth keys a topology's workers get instead of the cluster's payload."""
    cluster = conf.get(cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD)
    if cluster is None or not topology_name:
        return {}
    return {cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_SCHEME: SCHEME,
            cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_PAYLOAD: topology_payload(cluster, topology_name,
                                                                        owner),
            SUPER_ACL: f"{SCHEME}:{digest_id(cluster)}"}
