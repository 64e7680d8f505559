"""Who may use a DRPC server's ports, as a pure decision (``drpc.authorizer``).

Both ports are mutual TLS with the cluster's certificates (as Nimbus's, see
:mod:`squall.client.tls`), so every caller is an authenticated principal. ``simple`` (the
default) then decides by port, not by function:

* **execute** (``drpc.port``): any authenticated principal. A DRPC client is a program
  asking a question of a running topology; Storm's default (no ``drpc.authorizer.acl``)
  lets any authenticated user ask too.
* **fetchRequest / result / failRequest** (``drpc.invocations.port``): only the cluster's
  daemons (``nimbus.supervisor.users``, ``nimbus.daemon.users``), admins (``nimbus.admins``,
  ``nimbus.admins.groups``) and ``drpc.invocations.users``. Whoever may fetch reads every
  client's arguments and whoever may return a result answers for the topology, so this
  port is the cluster's. A DRPC topology's workers present the certificate its conf's
  ``squall.tls.*`` names: the supervisor's (they run as its user and can read it anyway,
  SECURITY.md) or one issued for the topology and listed in ``drpc.invocations.users``.

Storm's per-function ACL file (``drpc.authorizer.acl``) is not implemented: a
per-function rule would need the function's owner, which nothing here records.
``none`` admits every authenticated principal on both ports. Without TLS (loopback, or
``--insecure``) there are no principals and no authorization.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..client import config as cfg
from ..client.errors import ConfigError, PermissionDenied
from ..client.tls import Principal

CLIENT_VERBS = frozenset({"execute"})
INVOCATION_VERBS = frozenset({"fetchRequest", "result", "failRequest"})


class DRPCAuthorizer:
    """Example: ``DRPCAuthorizer(conf).check("fetchRequest", principal, "reach")``."""

    def __init__(self, conf: Mapping[str, Any]):
        kind = str(cfg.get(conf, cfg.DRPC_AUTHORIZER)).lower()
        if kind not in ("simple", "none"):
            raise ConfigError(cfg.DRPC_AUTHORIZER, f"unknown authorizer {kind!r}; use simple "
                                                   "or none")
        self.enabled = kind == "simple"
        self.admins = frozenset(cfg.get(conf, cfg.NIMBUS_ADMINS) or ())
        self.admin_groups = frozenset(cfg.get(conf, cfg.NIMBUS_ADMINS_GROUPS) or ())
        #: Who may use the invocations port besides admins.
        self.invokers = frozenset(cfg.get(conf, cfg.NIMBUS_SUPERVISOR_USERS) or ()) | \
            frozenset(cfg.get(conf, cfg.NIMBUS_DAEMON_USERS) or ()) | \
            frozenset(cfg.get(conf, cfg.DRPC_INVOCATIONS_USERS) or ())

    def permits(self, verb: str, p: Principal) -> bool:
        if verb not in CLIENT_VERBS and verb not in INVOCATION_VERBS:
            raise ValueError(f"unknown DRPC verb {verb!r}")
        if not self.enabled or verb in CLIENT_VERBS:
            return True
        return p.name in self.invokers or p.name in self.admins or \
            bool(p.groups & self.admin_groups)

    def check(self, verb: str, p: Principal, function: str) -> None:
        """Raise PermissionDenied unless ``p`` may ``verb`` (for ``function``, in the message)."""
        if self.permits(verb, p):
            return
        raise PermissionDenied(
            f"{p} may not {verb} for DRPC function {function!r}: the invocations port admits "
            f"only the cluster's daemons ({cfg.NIMBUS_SUPERVISOR_USERS}, "
            f"{cfg.NIMBUS_DAEMON_USERS}), {cfg.NIMBUS_ADMINS} and "
            f"{cfg.DRPC_INVOCATIONS_USERS}; give the topology's squall.tls.* a certificate "
            "of one of them")
