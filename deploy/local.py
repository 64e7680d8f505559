"""``squall local``: the real daemons on this machine, Storm's LocalCluster.

:class:`LocalCluster` starts a private ZooKeeper (Debian's package, free
loopback port, temporary data dir), a Nimbus with its gRPC server and one
supervisor in this process; the supervisor launches the worker processes as on
a cluster. :func:`run_local` loads a topology file, submits it through Nimbus
(the file's directory is uploaded as the package, as ``squall jar DIR`` does),
shows the workers and progress, and on stop (``--duration`` over, Ctrl-C)
deactivates the spouts, waits for the pending tuple trees to drain, kills the
topology and stops every process it started.

Workers inherit this process's stdout, so what components print shows up here;
their stderr goes to the supervisor's log files (``<dir>/logs``).

How a file exposes its topology: :mod:`squall.deploy.topology_file`. Its optional
``report(conf)`` runs once the topology is killed, with the daemons still up, in a
process of its own (:mod:`squall.deploy.report`), e.g. to print results kept in a state
store.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Mapping

from ..client import config as cfg
from ..client.contract import EXIT_USER_CODE, write_text_atomic
from ..client.daemon import Daemon
from ..client.errors import SquallError
from ..client.stateful import CHECKPOINT_COMPONENT_ID
from ..client.topology import Topology
from .net import free_ports
from .report import run_report
from .topology_file import LoadedTopology, load_topology_file, user_error

log = logging.getLogger("squall.local")

Echo = Callable[[str], None]


#: Settings of the local daemons: heartbeats every second so progress and drains are prompt.
LOCAL_DAEMON_CONF = {
    cfg.NIMBUS_MONITOR_FREQ_SECS: 1,
    cfg.SUPERVISOR_HEARTBEAT_FREQUENCY_SECS: 1,
    # Nothing restarts the supervisor of a local cluster: its workers go with it.
    cfg.SUPERVISOR_WORKER_ADOPT_SECS: 0,
}


class LocalCluster(Daemon):
    """A private ZooKeeper, a Nimbus and one supervisor with ``slots`` slots on this machine.

    Example::

        with LocalCluster() as lc:
            tid = lc.submit("wc", topology, {"topology.workers": 2}, code_dir)
            with lc.client() as nimbus:
                nimbus.topology_info(topology_id=tid)

    ``overrides`` (``-c`` pairs) apply to the daemons and to submitted topologies; the keys
    that point at the private daemons (ZooKeeper, Nimbus port, ``storm.local.dir``) are ours.
    """

    def __init__(self, overrides: Mapping[str, Any] | None = None, slots: int = 4,
                 base_dir: str | None = None, worker_stdout: Any = None,
                 on_worker_event: Callable[[Any], None] | None = None, web: bool = False,
                 kafka: bool = False, nats: bool = False, postgres: bool = False):
        super().__init__()
        #: Also start a Kafka broker (deploy/kafka.py) unless the overrides name one.
        self.kafka_wanted = kafka
        self.kafka = None
        #: Also start a NATS server with JetStream (deploy/nats.py) unless the overrides
        #: name one.
        self.nats_wanted = nats
        self.nats = None
        #: Also start a PostgreSQL (deploy/postgres.py) unless the overrides name a database.
        self.postgres_wanted = postgres
        self.postgres = None
        #: Also start the UI and a logviewer (squall local does; tests that need them too).
        self.web = web
        self.ui = self.logviewer = None
        self.overrides = cfg.normalize(dict(overrides or {}))
        self.slots = slots
        self.base_dir = base_dir or tempfile.mkdtemp(prefix="squall-local-")
        self.worker_stdout = worker_stdout
        self.on_worker_event = on_worker_event
        self.conf: dict[str, Any] = {}
        self.zookeeper = self.nimbus = self.server = self.supervisor = self.redis = None

    def start_unsafe(self) -> None:
        """Start ZooKeeper, Nimbus (until it leads) and the supervisor."""
        import secrets

        from ..nimbus.nimbus import Nimbus
        from ..nimbus.servicer import serve
        from ..supervisor.fetch import grpc_fetcher
        from ..supervisor.supervisor import Supervisor
        from .zookeeper import LocalZooKeeper

        self.zookeeper = LocalZooKeeper(tick_time_ms=500).start()
        nimbus_port, *slot_ports = free_ports(1 + self.slots)
        ours = dict(self.zookeeper.conf(), **{
            cfg.NIMBUS_SEEDS: ["127.0.0.1"], cfg.NIMBUS_GRPC_PORT: nimbus_port,
            cfg.STORM_LOCAL_DIR: self.base_dir,
            # A throwaway identity: other local users cannot read or rewrite our znodes.
            cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD: f"squall-local:{secrets.token_hex(16)}"})
        ours.update(self._start_redis())
        ours.update(self._start_kafka())
        ours.update(self._start_nats())
        ours.update(self._start_postgres())
        ours.update(self._throwaway_tls())
        ours[cfg.SQUALL_HTTP_TOKEN_FILE] = self._http_token()
        if cfg.SUPERVISOR_SLOTS_PORTS not in self.overrides:
            ours[cfg.SUPERVISOR_SLOTS_PORTS] = slot_ports
        self.conf = cfg.layered(LOCAL_DAEMON_CONF, self.overrides, ours)
        self._write_client_yaml()
        self.nimbus = Nimbus(self.conf).start()
        self.server = serve(self.nimbus, "127.0.0.1", nimbus_port)
        if not self.nimbus.wait_for_leadership(30):
            raise SquallError("the local Nimbus did not become leader within 30 s; see "
                              f"ZooKeeper's log in {self.zookeeper.dir}")
        self.supervisor = Supervisor(self.conf, fetch_topology=grpc_fetcher(self.conf),
                                     spawn=self._spawn,
                                     on_worker_event=self.on_worker_event).start()
        if self.web:
            self._start_web()

    def _http_token(self) -> str:
        """The token of this cluster's HTTP ports (UI, logviewer), in an owner-only file."""
        from ..client.web import new_token

        path = os.path.join(self.base_dir, "http.token")
        write_text_atomic(path, new_token() + "\n")
        return path

    def _start_web(self) -> None:
        """The logviewer over the supervisor's logs, and the UI on ui.port (a free port when
        that one is taken: a second squall local still gets a UI)."""
        from ..ui.server import LogViewerServer, UiServer

        self.logviewer = LogViewerServer(self.conf, [self.supervisor.files.logs_dir],
                                         host="127.0.0.1", port=0).start()
        port = int(cfg.get(self.conf, cfg.UI_PORT))
        try:
            self.ui = UiServer(self.conf, host="127.0.0.1", port=port,
                               logviewer_port=self.logviewer.web.port).start()
        except SquallError:
            self.ui = UiServer(self.conf, host="127.0.0.1", port=0,
                               logviewer_port=self.logviewer.web.port).start()

    def _write_client_yaml(self) -> None:
        """A squall.yaml other `squall` commands can use (SQUALL_CONF) to reach this cluster."""
        import yaml

        keys = (cfg.NIMBUS_SEEDS, cfg.NIMBUS_GRPC_PORT, cfg.SQUALL_TLS_CA_FILE,
                cfg.SQUALL_TLS_CERT_FILE, cfg.SQUALL_TLS_KEY_FILE, cfg.SQUALL_HTTP_TOKEN_FILE)
        #: Where that squall.yaml is.
        self.client_yaml = os.path.join(self.base_dir, "squall.yaml")
        write_text_atomic(self.client_yaml, yaml.safe_dump(  # owner-only
            {k: self.conf[k] for k in keys if self.conf.get(k) is not None}))

    def _throwaway_tls(self) -> dict[str, Any]:
        """Mutual TLS with a CA made for this run: one certificate, the local user's, which
        is also the supervisor's (SECURITY.md: `squall local` is secured automatically)."""
        import getpass

        from .certs import throwaway

        user = getpass.getuser()
        issued = throwaway(os.path.join(self.base_dir, "tls"), user)
        return {**issued.conf(), cfg.NIMBUS_SUPERVISOR_USERS: [user],
                cfg.NIMBUS_DAEMON_USERS: [user]}

    def _start_redis(self) -> dict[str, Any]:
        """A private Redis for Trident state when Debian's redis-server is installed and the
        overrides name no Redis of their own."""
        from ..client.extras import missing
        from ..client.trident.state.base import RedisUnavailable

        if any(k.startswith("trident.redis.") for k in self.overrides) or \
                missing("trident-redis"):
            return {}
        from .redis import LocalRedis, installation

        try:
            installation()
        except RedisUnavailable:
            return {}
        self.redis = LocalRedis().start()
        return {cfg.TRIDENT_REDIS_HOST: "127.0.0.1", cfg.TRIDENT_REDIS_PORT: self.redis.port}

    def _start_kafka(self) -> dict[str, Any]:
        """A private Kafka broker, asked for, when the overrides name no brokers."""
        if not self.kafka_wanted or cfg.KAFKA_BOOTSTRAP_SERVERS in self.overrides:
            return {}
        from .kafka import LocalKafka
        self.kafka = LocalKafka().start()
        return {cfg.KAFKA_BOOTSTRAP_SERVERS: self.kafka.bootstrap_servers}

    def _start_nats(self) -> dict[str, Any]:
        """A private NATS server with JetStream, asked for, when the overrides name none."""
        if not self.nats_wanted or cfg.NATS_SERVERS in self.overrides:
            return {}
        from .nats import LocalNats
        self.nats = LocalNats().start()
        return {cfg.NATS_SERVERS: self.nats.url}

    def _start_postgres(self) -> dict[str, Any]:
        """A private PostgreSQL, asked for, when the overrides name no database."""
        if not self.postgres_wanted or cfg.JDBC_CONF in self.overrides:
            return {}
        from .postgres import LocalPostgres
        self.postgres = LocalPostgres().start()
        return {cfg.JDBC_CONF: self.postgres.dsn()}

    def _spawn(self, cmd: list, log_path: str, env: dict) -> subprocess.Popen:
        """A worker with our stdout (components' prints show here) and stderr in its log file."""
        from ..supervisor.supervisor import spawn_worker
        with open(log_path, "ab") as logf:
            return spawn_worker(cmd, env, self.worker_stdout, logf)

    def client(self, timeout: float = 15.0):
        from ..client.nimbus_client import NimbusClient
        return NimbusClient(self.conf, timeout=timeout)

    def submit(self, name: str, topology: Topology, topology_conf: Mapping[str, Any] | None,
               code_dir: str, initial_status: str = "ACTIVE",
               warn: Callable[[str], Any] | None = None) -> str:
        """Upload ``code_dir`` and submit ``topology`` as ``name`` through gRPC; returns its id.

        The conf sent is what ``squall jar`` sends: ``topology.*`` keys of ``squall.yaml`` <
        ``topology_conf`` < the overrides.
        """
        from ..client.submitter import package_file, submission_conf
        from ..client.topology_proto import to_proto

        try:
            _, sent = submission_conf(cfg.load_yaml(cfg.find_yaml()), topology_conf,
                                      self.overrides)
        except cfg.ConfigError as e:
            raise SquallError(str(e)) from None
        workdir = tempfile.mkdtemp(prefix="upload-", dir=self.base_dir)
        try:
            with self.client(timeout=60.0) as nimbus:
                location = nimbus.upload(package_file(code_dir, workdir))
                return nimbus.submit(name, location, json.dumps(sent, sort_keys=True),
                                     to_proto(topology), initial_status=initial_status,
                                     warn=warn)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def close_unsafe(self, reason: str) -> None:
        """Stop the supervisor (and its workers), Nimbus and ZooKeeper, whichever started."""
        steps = [("ui", lambda s: s.close(reason)), ("logviewer", lambda s: s.close(reason)),
                 ("supervisor", lambda s: s.close(reason)),
                 ("server", lambda s: s.stop(grace=1).wait(5)),
                 ("nimbus", lambda s: s.close(reason)),
                 ("zookeeper", lambda s: s.stop()), ("redis", lambda s: s.stop()),
                 ("kafka", lambda s: s.stop()), ("nats", lambda s: s.stop()),
                 ("postgres", lambda s: s.stop())]
        for attr, stop in steps:
            daemon = getattr(self, attr)
            setattr(self, attr, None)
            if daemon is None:
                continue
            try:
                stop(daemon)
            except Exception:  # stop the rest anyway
                log.exception("local cluster: stopping the %s failed", attr)

    def cleanup(self) -> None:
        """Remove the cluster's directory (logs included)."""
        shutil.rmtree(self.base_dir, ignore_errors=True)


# --- squall local ---------------------------------------------------------------------
def spout_totals(info: Any) -> dict[str, int]:
    """acked / failed / pending / emitted summed over the user's spouts of a TopologyInfo
    (not the checkpoint spout: its trees are the runtime's)."""
    out = dict.fromkeys(("emitted", "acked", "failed", "pending"), 0)
    for c in info.components:
        if c.type == "spout" and c.component_id != CHECKPOINT_COMPONENT_ID:
            for k in out:
                out[k] += getattr(c, k)
    return out


def summarize(info: Any) -> list[str]:
    """End-of-run lines: each user component's counters (errors are shown as they come).
    Emitted counts the topology's own streams: checkpoint barriers and forwards ($...) and
    system streams (__...) are the runtime's, as executed and acked leave them out too."""
    lines = []
    for c in info.components:
        if c.component_id.startswith("__") or c.component_id == CHECKPOINT_COMPONENT_ID:
            continue
        emitted = sum(s.emitted for name, s in c.streams.items()
                      if not name.startswith(("__", "$"))) if c.streams else c.emitted
        if c.type == "spout":
            timed_out = f" (timed out {c.timed_out})" if c.timed_out else ""
            lines.append(f"spout {c.component_id}: emitted={emitted} acked={c.acked} "
                         f"failed={c.failed}{timed_out} pending={c.pending}")
        else:
            lines.append(f"bolt {c.component_id}: executed={c.executed} emitted={emitted} "
                         f"acked={c.acked} failed={c.failed}")
    return lines


_RAISED = re.compile(r"component '(?P<comp>[^']+)' raised (?P<exc>[\w.]+): (?P<msg>.*)$")
_FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<fn>.+)$')


def user_crash(log_text: str) -> tuple[str, str] | None:
    """``"tags raised SerializationError at setval.py:7 in execute (collector.emit(...)):
    <message>"`` from a worker log's tail: the component, the exception, the user's own
    frame nearest the raise (not Squall's, not a library's) and the message, with the
    error text the worker reports (``"SerializationError: <message>"``); None when the tail
    holds no such report."""
    lines = log_text.splitlines()
    at = max((i for i, ln in enumerate(lines) if _RAISED.search(ln)), default=None)
    if at is None:
        return None
    m = _RAISED.search(lines[at])
    where = ""
    for i in range(len(lines) - 1, at, -1):
        f = _FRAME.match(lines[i])
        if f and not _framework(f["path"]):
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            where = f" at {os.path.basename(f['path'])}:{f['line']} in {f['fn']}" + \
                (f" ({code})" if code and not _FRAME.match(lines[i + 1]) else "")
            break
    exc = m["exc"].rsplit(".", 1)[-1]
    return f"{m['comp']} raised {exc}{where}: {m['msg']}", f"{exc}: {m['msg']}"


#: Squall's own source folder (pure-Python frames; compiled ones read "squall/...").
_SQUALL_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


_SQUALL_PACKAGES = ("acker", "cli", "client", "connectors", "deploy", "drpc", "nimbus", "proto",
                    "supervisor", "testing", "ui", "worker")


def _framework(path: str) -> bool:
    """A frame of Squall, a library or Python itself: not where the user's mistake is."""
    if path.startswith(_SQUALL_DIR):
        return path[len(_SQUALL_DIR):].split(os.sep, 1)[0] in _SQUALL_PACKAGES
    return path.startswith(("squall/", "<", os.path.join(sys.base_prefix, ""),
                            os.path.join(sys.prefix, ""))) or "/site-packages/" in path


#: ``squall local``'s exit code when tuple trees failed, timed out or were still pending at
#: the end (1: a worker's user code raised, or squall local itself failed).
EXIT_TREES_FAILED = 3


def verdict(info: Any, topology: Topology, conf: Mapping[str, Any],
            hinted: frozenset[str] | set[str] = frozenset()) -> tuple[int, list[str]]:
    """The run's exit code and, when trees did not complete, what happened and a hint
    (unless the run gave it for that component already: ``hinted``)."""
    spouts = spout_totals(info)
    timed_out = sum(c.timed_out for c in info.components
                    if c.type == "spout" and c.component_id != CHECKPOINT_COMPONENT_ID)
    if not spouts["failed"] and not spouts["pending"]:
        return 0, []
    done = spouts["acked"] + spouts["failed"] + spouts["pending"]
    what = []
    if spouts["failed"]:
        what.append(f"{spouts['failed']} of {done} tuple tree(s) failed")
        if timed_out:
            what[-1] += (f" ({timed_out} timed out: {cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS}="
                         f"{conf.get(cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS)})")
    if spouts["pending"]:
        what.append(f"{spouts['pending']} of {done} never completed")
    lines = ["; ".join(what) + f": exit code {EXIT_TREES_FAILED}"]
    lines += [f"hint: {h}" for c, h in _hints(info, topology) if c not in hinted]
    return EXIT_TREES_FAILED, lines


def _hints(info: Any, topology: Topology) -> list[tuple[str, str]]:
    """(component, hint) for each bolt that executed tuples and acked none: the newcomer's
    usual mistake."""
    from ..client.components import Bolt
    out = []
    for c in info.components:
        comp = topology.components.get(c.component_id)
        if c.type != "bolt" or comp is None or comp.system or comp.shell is not None or \
                not c.executed or c.acked or c.failed:
            continue
        try:  # the user's own objects, in the user's own process
            plain = isinstance(comp.instantiate(), Bolt)  # not a BasicBolt, which acks
        except Exception:  # noqa: BLE001 - a hint is never worth a failure
            continue
        if plain:
            out.append((c.component_id, f"bolt {c.component_id} executed {c.executed} "
                        "tuple(s) and acked 0: a Bolt must ack each tuple it is done with "
                        "(self.collector.ack(tup)); a BasicBolt acks for you"))
    return out


#: How long an error waits before ``squall local`` shows it: a worker whose user code raised
#: reports the error, then exits; its exit (a moment later) shows it as one line with the
#: file and line, and the report would say it a second time.
ERROR_HOLD_SECS = 3.0


class ErrorFeed:
    """Errors as the topology reports them, each shown once on one line while the run goes
    on (the whole text is in the worker's log)."""

    def __init__(self, echo: Echo):
        self.echo = echo
        self.count = 0
        #: Errors shown that Nimbus still lists (it keeps a component's last few only).
        self._seen: set[tuple] = set()
        #: Error texts the run showed otherwise (a crash's own line): counted, not repeated.
        self.shown: set[str] = set()

    def show(self, errors: Any, hold: float = 0.0) -> None:
        """Show the errors not shown yet; one younger than ``hold`` seconds waits for the
        next call (a crash's own line, which comes with its worker's exit, says it better)."""
        now = set()
        young = time.time() - hold
        for e in errors:
            key = (e.component, e.task, e.time_secs, e.error)
            if key not in self._seen and e.time_secs > young:
                continue
            now.add(key)
            if key in self._seen:
                continue
            self.count += 1
            exc, sep, msg = e.error.strip().partition(": ")
            if exc.rsplit(".", 1)[-1] + sep + msg in self.shown:  # the name unqualified
                continue
            first, _, rest = e.error.strip().partition("\n")
            more = f" (+{rest.count(chr(10)) + 1} line(s) in its worker log)" if rest else ""
            at = time.strftime("%H:%M:%S", time.localtime(e.time_secs))
            self.echo(f"[squall local] error at {at} in {e.component} (task {e.task}, "
                      f"{e.host}:{e.port}): {first}{more}")
        self._seen = now


def _longest_tick(topology: Topology, conf: Mapping[str, Any]) -> float:
    ticks = [c.conf.get(cfg.TOPOLOGY_TICK_TUPLE_FREQ_SECS) for c in topology.components.values()]
    ticks.append(conf.get(cfg.TOPOLOGY_TICK_TUPLE_FREQ_SECS))
    return max((float(t) for t in ticks if t), default=0.0)


class _Run:
    """One ``squall local`` run: its cluster, the worker events, and the steps of a stop."""

    def __init__(self, loaded: LoadedTopology, overrides: Mapping[str, Any], echo: Echo,
                 kafka: bool = False):
        self.loaded = loaded
        self.echo = echo
        self.events: queue.Queue = queue.Queue()
        self.conf = cfg.layered(loaded.conf, overrides)
        workers = int(self.conf[cfg.TOPOLOGY_WORKERS])
        self.cluster = LocalCluster(overrides, slots=max(4, workers),
                                    on_worker_event=self.events.put, web=True,
                                    kafka=kafka or bool(loaded.kafka_topics),
                                    nats=bool(loaded.nats_streams),
                                    postgres=bool(loaded.postgres_tables))
        self.topology_id = ""
        self.crashed = False
        self.errors = ErrorFeed(echo)
        self._nimbus: Any = None

    @property
    def nimbus(self):
        """One client for the whole run (a client per poll would open a channel every 0.2 s)."""
        if self._nimbus is None:
            self._nimbus = self.cluster.client()
        return self._nimbus

    def close(self) -> None:
        """Close the client, then stop the cluster."""
        if self._nimbus is not None:
            self._nimbus.close()
        self.cluster.close("squall local stopping")

    def worker_conf(self) -> dict[str, Any]:
        """The conf the workers ran with: this cluster's keys beneath the topology conf."""
        import getpass  # the local user is the submitting principal (its certificate's CN)
        return cfg.layered(cfg.worker_inherited(self.cluster.conf, self.loaded.name,
                                                getpass.getuser()),
                           self.loaded.conf, self.cluster.overrides)

    def info(self):
        return self.nimbus.topology_info(topology_id=self.topology_id)

    def show_events(self) -> None:
        """Echo launched and exited workers; a worker whose user code raised ends the run."""
        from ..supervisor.supervisor import log_tail
        while True:
            try:
                ev = self.events.get_nowait()
            except queue.Empty:
                return
            if ev.kind == "launched":
                self.echo(f"[squall local]   worker 127.0.0.1:{ev.port} pid {ev.pid} "
                          f"tasks {list(ev.tasks)}")
            elif ev.kind == "exited":
                tail = log_tail(ev.log_path, 60)
                crash = user_crash(tail) if ev.exit_code == EXIT_USER_CODE else None
                if crash is not None:  # the user's mistake: what and where, on one line
                    self.echo(f"[squall local] {crash[0]} (worker 127.0.0.1:{ev.port}, pid "
                              f"{ev.pid}; the traceback is in {ev.log_path})")
                    self.errors.shown.add(crash[1])  # its report need not say it again
                else:
                    why = "user code raised" if ev.exit_code == EXIT_USER_CODE else "exited"
                    self.echo(f"[squall local] worker 127.0.0.1:{ev.port} (pid {ev.pid}) "
                              f"{why}: exit code {ev.exit_code}; last lines of {ev.log_path}:"
                              f"\n{''.join(tail.splitlines(keepends=True)[-25:])}")
                if ev.exit_code == EXIT_USER_CODE:
                    self.crashed = True
                else:
                    self.echo("[squall local] its supervisor restarts it")

    def drain(self, timeout: float) -> Any:
        """Deactivate, then wait (bounded) for counters newer than that with no tree pending;
        returns the last TopologyInfo seen."""
        since = time.time()
        self.nimbus.deactivate(self.loaded.name)
        deadline = time.monotonic() + timeout
        info = self.info()
        #: When the spouts were first seen with no tree pending (wall clock), or None.
        settled = None
        while time.monotonic() < deadline and not self.crashed:
            fresh = info.executors and all(e.stats_time_secs > since for e in info.executors)
            if settled is None and fresh and spout_totals(info)["pending"] == 0:
                # Each worker's counters are as of its own last report: a bolt's may predate
                # the last acks the spout's already counts. One more report of every worker
                # after this moment holds the final counts (nothing runs any more).
                settled = since = time.time()
            elif settled is not None and fresh:
                # Tick-driven bolts get one more tick to pass on what they hold.
                tick = _longest_tick(self.loaded.topology, self.conf)
                if tick:
                    time.sleep(min(tick, 10.0) + 0.3)
                return self.info()
            time.sleep(0.2)
            self.show_events()
            info = self.info()
        self.echo(f"[squall local] {spout_totals(info)['pending']} tuple tree(s) still pending "
                  f"after {timeout:g} s; stopping anyway")
        return info

    def kill(self, timeout: float = 30.0) -> None:
        """Kill with no wait and return once Nimbus removed it and its workers are gone."""
        self.nimbus.kill(self.loaded.name, wait_secs=0)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.show_events()
            listed = any(t.id == self.topology_id for t in self.nimbus.list().topologies)
            if not listed and not self.cluster.supervisor.procs:
                return
            time.sleep(0.1)
        self.echo(f"[squall local] the topology was not removed within {timeout:g} s; "
                  "stopping its workers")


def run_local(path: str, duration: float | None, cli_overrides: Mapping[str, Any],
              echo: Echo = print, progress_every: float = 5.0,
              flux: Mapping[str, Any] | None = None, kafka: bool = False,
              keep_logs: bool = False) -> int:
    """``squall local``: run until ``duration`` passes or Ctrl-C; returns the exit code
    (0, 1 on a crash, EXIT_TREES_FAILED). With ``flux`` (``filter``, ``env_filter``),
    ``path`` is a Flux YAML file; ``kafka`` starts a Kafka broker (as a file's
    ``KAFKA_TOPICS`` does). The run's directory (logs) is removed after a clean run with no
    error reported, unless ``keep_logs``."""
    if flux is not None:
        from .flux import load_flux
        loaded = load_flux(path, flux.get("filter"), bool(flux.get("env_filter")))
    else:
        loaded = load_topology_file(path)
    cfg.refuse_unknown_keys(loaded.conf, f"{path}: {'config' if flux else 'CONF'}")  # first
    run = _Run(loaded, cli_overrides, echo, kafka)
    stop = {"why": None}

    def on_signal(signum: int, frame: Any) -> None:
        stop["why"] = f"signal {signum}"

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    # The run shows each worker's exit itself (show_events): the in-process supervisor's
    # own warning about it, with the log's tail, would say it again on stderr.
    sup_log = logging.getLogger("squall.supervisor")
    sup_log.addFilter(_not_worker_exits)
    code = 1
    try:
        echo(f"[squall local] starting ZooKeeper, Nimbus and a supervisor in "
             f"{run.cluster.base_dir}")
        run.cluster.start()
        c = run.cluster
        redis = f", Redis {c.redis.address} (pid {c.redis.pid})" if c.redis else ""
        echo(f"[squall local] ZooKeeper {c.zookeeper.connect_string} (pid {c.zookeeper.pid}), "
             f"Nimbus {c.nimbus.address}{redis}, supervisor slots {c.supervisor.ports}; "
             f"other squall commands reach it with SQUALL_CONF={c.client_yaml}")
        if c.ui is not None:
            echo(f"[squall local] UI: {c.ui.login_url()}  (logviewer {c.logviewer.url})")
        _prepare_kafka(run)
        _prepare_nats(run)
        _prepare_postgres(run)
        if loaded.setup is not None:
            try:
                loaded.setup(run.worker_conf())
            except Exception as exc:  # the user's code: one line
                raise user_error(loaded.path, exc, "running its setup()") from None
        run.topology_id = c.submit(loaded.name, loaded.topology, loaded.conf, loaded.code_dir,
                                   warn=lambda w: echo(f"[squall local] warning: {w}"))
        echo(f"[squall local] topology {loaded.name} submitted as {run.topology_id}; "
             f"worker logs in {c.supervisor.files.logs_dir}")
        code = _watch(run, duration, stop, progress_every)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        sup_log.removeFilter(_not_worker_exits)
        run.close()
        if code == 0 and not run.errors.count and not keep_logs:
            run.cluster.cleanup()
        else:
            echo(f"[squall local] logs kept in {run.cluster.base_dir}")
    return code


def _not_worker_exits(record: logging.LogRecord) -> bool:
    """The supervisor's warning that a worker exited on its own (``squall local`` shows
    that itself); its other warnings pass."""
    return not ("exited with code" in record.getMessage() and "last lines of" in record.msg)


def _prepare_kafka(run: _Run) -> None:
    """Say where the broker is; create the file's KAFKA_TOPICS on ours."""
    kafka = run.cluster.kafka
    if kafka is None:
        return
    run.echo(f"[squall local] Kafka ({kafka.kind}) {kafka.bootstrap_servers} (pid {kafka.pid}): "
             f"{cfg.KAFKA_BOOTSTRAP_SERVERS}={kafka.bootstrap_servers}")
    for topic, partitions in (run.loaded.kafka_topics or {}).items():
        kafka.create_topic(topic, partitions)
        run.echo(f"[squall local]   topic {topic} ({partitions} partitions)")


def _prepare_nats(run: _Run) -> None:
    """Say where the NATS server is; create the file's NATS_STREAMS on ours."""
    nats = run.cluster.nats
    if nats is None:
        return
    run.echo(f"[squall local] NATS {nats.address} (pid {nats.pid}, JetStream): "
             f"{cfg.NATS_SERVERS}={nats.url}")
    for stream, subjects in (run.loaded.nats_streams or {}).items():
        nats.create_stream(stream, subjects)
        run.echo(f"[squall local]   stream {stream} ({', '.join(subjects)})")


def _prepare_postgres(run: _Run) -> None:
    """Say where the database is; create the file's POSTGRES_TABLES in ours."""
    pg = run.cluster.postgres
    if pg is None:
        return
    shown = cfg.redact({cfg.JDBC_CONF: pg.dsn()})[cfg.JDBC_CONF]
    run.echo(f"[squall local] PostgreSQL {pg.address} (pid {pg.pid}): {cfg.JDBC_CONF}={shown}")
    from psycopg import sql
    with pg.connect() as conn:
        for table, columns in (run.loaded.postgres_tables or {}).items():
            try:
                conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(
                    sql.Identifier(*table.split(".")), sql.SQL(columns)))
            except Exception as e:  # the user's column list: one line
                raise SquallError(f"{run.loaded.path}: POSTGRES_TABLES[{table!r}]: "
                                  f"{str(e).strip().splitlines()[0]}") from None
            run.echo(f"[squall local]   table {table} ({columns})")


def _watch(run: _Run, duration: float | None, stop: dict, progress_every: float) -> int:
    """Run until the duration, a signal or a crash; then drain, kill and summarize."""
    echo = run.echo
    t0 = time.monotonic()
    next_progress = t0 + progress_every
    next_look = t0
    hinted: set[str] = set()
    while stop["why"] is None and not run.crashed:
        now = time.monotonic()
        if duration is not None and now - t0 >= duration:
            break
        run.show_events()
        if now >= next_look:  # the supervisor reports once a second (LOCAL_DAEMON_CONF)
            info = run.info()
            run.errors.show(info.errors, hold=ERROR_HOLD_SECS)
            if spout_totals(info)["failed"]:  # trees fail: say why now if it is the usual
                for c, h in _hints(info, run.loaded.topology):
                    if c not in hinted:
                        hinted.add(c)
                        echo(f"[squall local] hint: {h}")
            next_look = now + 1.0
            if now >= next_progress:
                t = spout_totals(info)
                echo(f"[squall local] {now - t0:.0f}s: acked={t['acked']} "
                     f"failed={t['failed']} pending={t['pending']}")
                next_progress = now + progress_every
        time.sleep(0.1)
    if stop["why"]:
        echo(f"[squall local] stopping ({stop['why']}): draining pending tuples")
    if run.crashed:
        info = run.info()
    else:
        info = run.drain(float(run.conf.get(cfg.TOPOLOGY_SHUTDOWN_DRAIN_SECS, 10)))
    run.errors.show(info.errors)
    run.kill()
    for line in summarize(info):
        echo(f"[squall local] {line}")
    if run.errors.count:
        echo(f"[squall local] {run.errors.count} error(s) reported (shown above as they came)")
    if run.loaded.report is not None and not run.crashed:
        # Spark's banner and log lines go to a file, not the console (the workers' go to
        # their logs already).
        run_report(run.loaded.path, run.worker_conf(),
                   jvm_log=os.path.join(run.cluster.base_dir, "logs", "report-jvm.log"))
    if run.crashed:
        return 1
    code, lines = verdict(info, run.loaded.topology, run.conf, hinted)
    for line in lines:
        echo(f"[squall local] {line}")
    return code
