"""The supervisor's real fetcher: a topology's files downloaded from Nimbus over gRPC.

``grpc_fetcher(conf)`` returns the ``fetch_topology(topology_id, dest)`` callable
:class:`~squall.supervisor.supervisor.Supervisor` wants. It writes into ``dest``
(a temporary dir the supervisor renames once complete):

=================  ==========================================================
``package.zip``    ``DownloadPackage``: the uploaded code (a zip, or a .pyz, which is a zip too)
``topology.pb``    ``GetUserTopology``: the serialized user StormTopology
``conf.json``      ``GetTopologyConf``: the topology conf as Nimbus stored it
=================  ==========================================================

Errors (Nimbus unreachable, topology gone) propagate; the supervisor logs them and
retries on its next round.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping

from ..client.contract import CONF_FILE, PACKAGE_FILE, TOPOLOGY_FILE
from ..client.nimbus_client import NimbusClient


def fetch_from(client: NimbusClient, topology_id: str, dest: str) -> None:
    """Write ``topology_id``'s package, topology and conf into ``dest`` using ``client``."""
    data = client.download(topology_id)
    topology = client.user_topology(topology_id)
    conf_json = client.topology_conf(topology_id, include_secrets=True)  # workers need them
    _write(os.path.join(dest, PACKAGE_FILE), data)
    _write(os.path.join(dest, TOPOLOGY_FILE), topology.SerializeToString(deterministic=True))
    _write(os.path.join(dest, CONF_FILE), (conf_json or "{}").encode())


def grpc_fetcher(conf: Mapping[str, Any], timeout: float = 60.0
                 ) -> Callable[[str, str], None]:
    """A ``fetch_topology(topology_id, dest)`` calling the Nimbus of ``conf`` (``nimbus.seeds``)."""
    conf = dict(conf)

    def fetch_topology(topology_id: str, dest: str) -> None:
        with NimbusClient(conf, timeout=timeout) as client:
            fetch_from(client, topology_id, dest)

    return fetch_topology


def grpc_heartbeat_sender(conf: Mapping[str, Any], timeout: float = 5.0
                          ) -> Callable[[Any], None]:
    """A ``send_heartbeats(SupervisorWorkerHeartbeats)`` calling the Nimbus of ``conf``.

    One channel, kept open across calls (gRPC reconnects on its own); errors propagate
    (the supervisor logs them).
    """
    client = NimbusClient(dict(conf), timeout=timeout)

    def send_heartbeats(message: Any) -> None:
        client.send_heartbeats(message)

    send_heartbeats.close = client.close  # type: ignore[attr-defined]
    return send_heartbeats


def _write(path: str, data: bytes) -> None:
    # Owner-only: the conf holds the topology's secrets (its CurveZMQ key among them).
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
        fh.write(data)
