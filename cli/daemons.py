"""``squall nimbus``, ``squall supervisor``, ``squall drpc`` and the web daemons: a daemon in
the foreground until a signal.

Each runs until SIGINT or SIGTERM (the handler only sets an event), then closes the daemon
with ``reason="signal-N"``.
"""

from __future__ import annotations

import contextlib
import os
import logging
import signal
import sys
import threading
import time
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


@contextlib.contextmanager
def connecting(conf: Mapping[str, Any], echo: Echo, every: float = 5.0):
    """Say at once that ZooKeeper is being reached, and every ``every`` s while it is not
    (a daemon used to wait storm.zookeeper.connection.timeout in silence)."""
    from ..client.cluster_state import connect_string
    address = connect_string(conf)
    limit = cfg.get(conf, cfg.STORM_ZOOKEEPER_CONNECTION_TIMEOUT) / 1000
    echo(f"connecting to ZooKeeper at {address} (up to {limit:g} s, "
         f"{cfg.STORM_ZOOKEEPER_CONNECTION_TIMEOUT})")
    done = threading.Event()
    started = time.monotonic()

    def progress() -> None:
        while not done.wait(every):
            echo(f"still waiting for ZooKeeper at {address} "
                 f"({time.monotonic() - started:.0f} s of {limit:g})")
    t = threading.Thread(target=progress, name="squall-zk-progress", daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join(timeout=1)


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
    with connecting(conf, echo):
        nimbus = Nimbus(conf)  # ZooKeeperUnavailable names the address
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
    with connecting(conf, echo):
        sup = Supervisor(conf, fetch_topology=grpc_fetcher(conf))
    reason = "error"
    # A stopped daemon leaves its workers running for a restarted one to take back, as Storm's.
    sup.stop_workers_on_close = False
    try:
        sup.start()
        workers = (f"its workers run on {sup.adopt_secs:g} s for a restarted supervisor to take "
                   "them back (squall kill_workers stops them)" if sup.adopt_secs > 0
                   else "its workers exit with it")
        echo(f"supervisor {sup.id} on {sup.host} running, slots {sup.ports}, local dir "
             f"{sup.local_dir}; Ctrl-C stops it, {workers}")
        signum = wait()
        reason = f"signal-{signum}"
        echo(f"supervisor stopping ({reason})")
    finally:
        sup.close(reason=reason)


def run_web(daemon: Any, echo: Echo, wait: Callable[[], int] = wait_for_signal) -> None:
    """A web daemon (ui/server.py) until ``wait()`` returns a signal."""
    daemon.start()
    try:
        if os.environ.get("JOURNAL_STREAM") or not sys.stdout.isatty():
            # A service's output is kept (the journal, a log file) and read by others than
            # the operator: name the token's file, never the token.
            echo(f"{daemon.label} running: open {daemon.url}/?token=<the token in "
                 f"{daemon.conf.get(cfg.SQUALL_HTTP_TOKEN_FILE)}> ; Ctrl-C stops it")
        else:
            echo(f"{daemon.label} running: open {daemon.login_url()} ; Ctrl-C stops it")
        signum = wait()
        echo(f"{daemon.label} stopping (signal-{signum})")
    finally:
        daemon.close()


def run_ui(conf: Mapping[str, Any], echo: Echo, wait: Callable[[], int] = wait_for_signal,
           insecure: bool = False) -> None:
    from ..ui.server import UiServer
    run_web(UiServer(conf, insecure=insecure), echo, wait)


def run_logviewer(conf: Mapping[str, Any], echo: Echo, wait: Callable[[], int] = wait_for_signal,
                  insecure: bool = False) -> None:
    from ..ui.server import LogViewerServer
    run_web(LogViewerServer(conf, insecure=insecure), echo, wait)


def run_drpc(conf: Mapping[str, Any], echo: Echo, wait: Callable[[], int] = wait_for_signal,
             insecure: bool = False) -> None:
    """The DRPC server (drpc/server.py) on ``drpc.bind.host``, until ``wait()`` returns a
    signal."""
    from ..drpc.server import DRPCServer
    server = DRPCServer(conf, insecure=insecure)
    try:
        server.start()
    except OSError as e:  # a refused address or a taken port: one line
        raise SquallError(str(e)) from None
    reason = "error"
    try:
        echo(f"DRPC server running: execute on {server.host}:{server.port}, invocations on "
             f"{server.host}:{server.invocations_port}; Ctrl-C stops it")
        reason = f"signal-{wait()}"
        echo(f"DRPC server stopping ({reason})")
    finally:
        server.close(reason=reason)
