"""Where the NATS connectors connect (:class:`NatsConfig`), the names they derive (a
topology's durable consumer), and the error a launcher or connector raises when NATS
cannot be reached (:class:`NatsUnavailable`).

Servers left unset come from the topology conf's ``nats.servers`` key when the component is
prepared, so a topology names its NATS once for every spout and bolt (``squall local``
sets the key to the server it starts). Pure: no connection is made here.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from ...client import config as cfg
from ...client.errors import SquallError

#: The server a config names when neither it nor the topology conf does.
DEFAULT_SERVER = "nats://127.0.0.1:4222"
#: What a durable consumer's name may hold (JetStream refuses ``.``, ``*``, ``>``, spaces
#: and path separators in it; the rest of the printable ASCII set is kept to letters,
#: digits, ``-`` and ``_`` so the name is also a safe subject token and file name).
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_-]")


class NatsUnavailable(SquallError):
    """NATS cannot be reached, or cannot be started here; ``address`` is what was tried."""

    def __init__(self, address: str | None, message: str):
        #: ``host:port`` or the server URLs tried (None: nothing was tried yet).
        self.address = address
        super().__init__(message)


def durable_name(topology_name: str) -> str:
    """A JetStream spout's durable consumer when it names none: ``squall-<topology>`` with
    every character NATS does not allow in a name made ``_``; the same for every run of the
    topology, so a resubmitted one goes on where the last one stopped."""
    return "squall-" + _NOT_IN_NAME.sub("_", topology_name or "topology")


def check_name(name: str, what: str) -> str:
    """``name`` if JetStream takes it as a stream or consumer name, else ValueError."""
    if not name or _NOT_IN_NAME.search(name):
        raise ValueError(f"{what} {name!r}: letters, digits, '-' and '_' only (JetStream "
                         "refuses '.', '*', '>', spaces and path separators)")
    return name


def _url(spec: Any) -> str:
    """``nats://host:port`` from a URL or ``host:port``."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"a NATS server is a URL or host:port, not {spec!r}")
    spec = spec.strip()
    if "://" not in spec:
        spec = "nats://" + spec
    scheme, _, rest = spec.partition("://")
    if scheme not in ("nats", "tls", "ws", "wss") or not rest:
        raise ValueError(f"NATS server {spec!r}: the scheme is nats://, tls://, ws:// or wss://")
    return spec


def servers_of(value: Any) -> list[str]:
    """A servers setting (one string, comma-separated, or a list) as URLs."""
    if isinstance(value, str):
        value = [s for s in value.split(",") if s.strip()]
    if not value or not isinstance(value, (list, tuple)):
        raise ValueError(f"NATS servers are a URL, a comma-separated list or a list, not "
                         f"{value!r}")
    return [_url(s) for s in value]


class NatsConfig:
    """The connectors' NATS: the servers (default: the topology conf's ``nats.servers``,
    then ``nats://127.0.0.1:4222``), credentials (user and password, or a token) and the
    connect timeout. Checked here, so a mistake surfaces when the topology is built.

    Example::

        NatsConfig(["nats://n1:4222", "nats://n2:4222"], user="squall", password="...")
    """

    def __init__(self, servers: str | Sequence[str] | None = None, *, user: str | None = None,
                 password: str | None = None, token: str | None = None,
                 connect_timeout_secs: float = 2.0, reconnect_wait_secs: float = 0.5):
        #: The servers given here (None: the topology conf's).
        self.servers = servers_of(servers) if servers is not None else None
        if (user is None) != (password is None):
            raise ValueError("NATS user and password go together")
        if token is not None and user is not None:
            raise ValueError("NATS takes a token or a user and password, not both")
        if connect_timeout_secs <= 0 or reconnect_wait_secs < 0:
            raise ValueError("connect_timeout_secs must be above 0, reconnect_wait_secs 0 or more")
        self.user, self.password, self.token = user, password, token
        self.connect_timeout_secs = float(connect_timeout_secs)
        self.reconnect_wait_secs = float(reconnect_wait_secs)

    def server_urls(self, conf: Mapping[str, Any] | None) -> list[str]:
        """The servers under the topology conf ``conf``."""
        if self.servers is not None:
            return list(self.servers)
        given = (conf or {}).get(cfg.NATS_SERVERS)
        return servers_of(given) if given else [DEFAULT_SERVER]

    def describe(self, conf: Mapping[str, Any] | None) -> str:
        """Where it connects, for errors and logs (never the credentials)."""
        return "NATS " + ",".join(_without_credentials(u) for u in self.server_urls(conf))

    def options(self, conf: Mapping[str, Any] | None) -> dict[str, Any]:
        """Keyword arguments of ``nats.connect``: reconnect for ever once connected (a
        restarted server is found again; what was in flight is redelivered), a short wait
        between attempts, the credentials given."""
        out: dict[str, Any] = {
            "servers": self.server_urls(conf),
            "connect_timeout": self.connect_timeout_secs,
            "reconnect_time_wait": self.reconnect_wait_secs,
            "max_reconnect_attempts": -1,
            "allow_reconnect": True,
        }
        if self.user is not None:
            out["user"], out["password"] = self.user, self.password
        if self.token is not None:
            out["token"] = self.token
        return out

    def __repr__(self) -> str:
        shown = [f"servers={self.servers!r}"] if self.servers else []
        if self.user is not None:
            shown.append(f"user={self.user!r}, password='***'")
        if self.token is not None:
            shown.append("token='***'")
        return f"NatsConfig({', '.join(shown)})"


def _without_credentials(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.rpartition('@')[2]}"
