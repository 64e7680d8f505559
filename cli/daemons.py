"""``squall nimbus`` and ``squall supervisor``: a daemon in the foreground until a signal.

Each runs until SIGINT or SIGTERM (the handler only sets an event), then closes the daemon
with ``reason="signal-N"``.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any, Callable, Iterable, Mapping

from ..client import config as cfg
from ..client.errors import SquallError
from ..nimbus.nimbus import Nimbus
from ..nimbus.servicer import serve
from ..supervisor.fetch import grpc_fetcher
from ..supervisor.supervisor import Supervisor

Echo = Callable[[str], None]


def daemon_logging() -> None:
    """Daemons log INFO and up to stderr (unless ``-v`` already asked for DEBUG)."""
    logger = logging.getLogger("squall")
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)


# --- daemons -------------------------------------------------------------------------
def wait_for_signal(signals: Iterable[int] = (signal.SIGINT, signal.SIGTERM)) -> int:
    """Block until one of ``signals`` arrives; returns its number. The handler only sets an event."""
    got = threading.Event()
    which: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        which.append(signum)
        got.set()

    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        while not got.wait(1.0):
            pass
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return which[0]


def run_nimbus(conf: Mapping[str, Any], echo: Echo,
               wait: Callable[[], int] = wait_for_signal, insecure: bool = False) -> None:
    """Nimbus plus its gRPC server on ``nimbus.bind.host``:``nimbus.grpc.port``, until
    ``wait()`` returns a signal."""
    nimbus = Nimbus(conf)  # connects to ZooKeeper: ZooKeeperUnavailable names the address
    reason = "error"
    try:
        try:  # bind first: a refused address or a taken port must not take part in elections
            server = serve(nimbus, str(cfg.get(conf, cfg.NIMBUS_BIND_HOST)), nimbus.port,
                           insecure=insecure)
        except OSError as e:
            raise SquallError(str(e)) from None
        try:
            nimbus.start()
            echo(f"Nimbus {nimbus.address} running (ZooKeeper root "
                 f"{conf.get(cfg.STORM_ZOOKEEPER_ROOT)}); Ctrl-C stops it")
            signum = wait()
            reason = f"signal-{signum}"
            echo(f"Nimbus stopping ({reason})")
        finally:
            server.stop(grace=1).wait(5)
    finally:
        nimbus.close(reason=reason)


def run_supervisor(conf: Mapping[str, Any], echo: Echo,
                   wait: Callable[[], int] = wait_for_signal) -> None:
    """A supervisor fetching topologies from Nimbus over gRPC, until ``wait()`` returns a signal."""
    sup = Supervisor(conf, fetch_topology=grpc_fetcher(conf))
    reason = "error"
    try:
        sup.start()
        echo(f"supervisor {sup.id} on {sup.host} running, slots {sup.ports}, local dir "
             f"{sup.local_dir}; Ctrl-C stops it and its workers")
        signum = wait()
        reason = f"signal-{signum}"
        echo(f"supervisor stopping ({reason})")
    finally:
        sup.close(reason=reason)
