"""The shared cluster of the abuse suite (tests/integration/test_abuse.py), as processes on
loopback with mutual TLS and a locked ZooKeeper: Nimbus (with its /metrics port), two
supervisors (127.0.0.1 and 127.0.0.2, each with its /metrics port), the UI, a logviewer and
a DRPC server, and the users' certificates: alice (the victim, who runs the reliable,
endless word count of examples/ with `squall jar`), mallory and trudy (other users of the
cluster's CA) and a stranger (a certificate of another CA, naming alice; no HTTP token).

Fixtures: ``abuse`` (module-scoped: the cluster with alice's word count running, every
process stopped by pid at the end) and ``probe`` (per test: the victim as it was and the
daemons' RSS during the test; the test ends with :meth:`Probe.victim_unharmed`).

Keys that exist are set small (the inbox's byte quota and expiry, the DRPC threads);
deadlines that are fixed in the daemons' code are read from it (the test process imports
the same modules), never shortened: a daemon process cannot be monkeypatched.
"""

from __future__ import annotations

import glob
import inspect
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import grpc
import psutil
import pytest
import yaml

from squall.client import config as cfg
from squall.client import tls, web
from squall.client.nimbus_client import NimbusClient
from squall.deploy.certs import CertificateAuthority
from squall.drpc.requests import RequestTable
from squall.nimbus import servicer
from test_cli_cluster import EXAMPLES, squall_cmd
from test_ui_rest import WebCluster
from zk_fixtures import TEST_SESSION_TIMEOUT, poll_for

MiB = 1024 * 1024
#: How often the victim's workers write stats, and supervisors report to Nimbus (seconds).
STATS_SECS = 0.2
REPORT_SECS = 0.5
#: nimbus.monitor.freq.secs (Cluster's): Nimbus expires inbox uploads once a round.
MONITOR_SECS = 1.0
#: Small on purpose, so the inbox probes need megabytes and seconds, not 512 MiB and an hour.
INBOX_BYTES_PER_USER = 4 * MiB
INBOX_EXPIRY_SECS = 4.0
#: drpc.worker.threads: a principal may keep half of them waiting.
DRPC_THREADS = 8
#: How far above its RSS at a probe's start a daemon's RSS may go during the probe. Every
#: probe but the flood adds at most 10 MiB to any daemon (each test prints its peaks).
RSS_MARGIN = 32 * MiB
#: ... and Nimbus's and the DRPC server's under the flood of idle connections: holding the
#: 1,000 a port takes costs 40-56 KiB each (measured: +38 to +56 MiB), twice that is
#: allowed. Finding 8's 20,000 took Nimbus from 106 to 998 MiB; the probe opens 3,000 per
#: port, which without the cap would add ~150 MiB.
FLOOD_RSS_MARGIN = 128 * MiB
#: The daemons' own fixed bounds, read from the code they run.
STREAM_IDLE_SECS = servicer.STREAM_IDLE_SECS
HEADER_SECS = web.HEADER_SECS
PER_ADDRESS = web.MAX_CONNECTIONS_PER_CLIENT
HANDSHAKE_SECS = tls.GRPC_HANDSHAKE_MS / 1000
MAX_GRPC_CONNECTIONS = tls.GRPC_MAX_CONNECTIONS
UNSERVED_SECS = RequestTable.UNSERVED_SECS
#: Nimbus's gRPC threads (squall nimbus's) and the streams all users may hold.
NIMBUS_THREADS = inspect.signature(servicer.serve).parameters["max_workers"].default
ALL_STREAMS = NIMBUS_THREADS // 4


class AbuseCluster(WebCluster):
    """WebCluster (Nimbus, two supervisors, UI, logviewer, the HTTP token) plus a DRPC
    server, and certificates for alice, mallory, trudy (each with a squall.yaml of their
    own for the CLI) and a stranger (another CA's)."""

    def __init__(self, tmp_path: Path, zk_conf: dict, zk_hosts: str):
        super().__init__(tmp_path, zk_conf)
        self.zk_hosts = zk_hosts
        #: Bound by the DRPC server itself (port 0), read from its log: a port picked
        #: beforehand may be taken by another process's connection before the bind.
        self.drpc_port = self.drpc_invocations_port = 0
        self.conf.update({
            "nimbus.inbox.max.bytes.per.user": INBOX_BYTES_PER_USER,
            "nimbus.inbox.jar.expiration.secs": INBOX_EXPIRY_SECS,
            "drpc.servers": ["127.0.0.1"], "drpc.bind.host": "127.0.0.1",
            "drpc.worker.threads": DRPC_THREADS, "drpc.request.timeout.secs": 30,
            "supervisor.heartbeat.frequency.secs": REPORT_SECS})
        self.yaml.write_text(yaml.safe_dump(self.conf))
        ca = CertificateAuthority(str(tmp_path / "pki"))  # the one Cluster made
        self.daemon_tls["drpc"] = [f"-c{k}={v}" for k, v in
                                   ca.issue("drpc", server=True).conf().items()]
        base = {k: v for k, v in self.conf.items() if not k.startswith("squall.tls.")}
        #: Each user's conf (their certificate; the stranger's is of another CA).
        self.users = {who: dict(base, **ca.issue(who).conf())
                      for who in ("alice", "mallory", "trudy")}
        other = CertificateAuthority(str(tmp_path / "other-ca")).issue("alice")
        self.users["stranger"] = dict(base, **other.conf())
        self.user_env = {}
        for who, conf in self.users.items():
            path = tmp_path / f"{who}.yaml"
            path.write_text(yaml.safe_dump(conf))
            self.user_env[who] = dict(self.env, SQUALL_CONF=str(path))
        #: The supervisor's private key (what a hard link must not leak).
        self.supervisor_key = next(a.split("=", 1)[1] for a in self.daemon_tls["supervisor"]
                                   if a.startswith(f"-c{cfg.SQUALL_TLS_KEY_FILE}="))
        self.rss_baseline: dict[str, int] = {}

    def start(self):
        super().start()
        self.start_daemon("drpc", "drpc", "-c", "drpc.port=0", "-c", "drpc.invocations.port=0")
        started = re.compile(r"DRPC server running: execute on 127\.0\.0\.1:(\d+), "
                             r"invocations on 127\.0\.0\.1:(\d+)")
        ports = poll_for(lambda: started.search((self.tmp / "drpc.log").read_text()),
                         timeout=30, what="the DRPC server's ports\n" + self.logs())
        self.drpc_port, self.drpc_invocations_port = int(ports[1]), int(ports[2])
        #: No later than the server's start (its request table is made before it logs).
        self.drpc_started = time.monotonic()
        for conf in self.users.values():
            conf.update({"drpc.port": self.drpc_port,
                         "drpc.invocations.port": self.drpc_invocations_port})

    def stop(self):
        """Cluster.stop, with every daemon signalled at once (each takes seconds to stop)."""
        for p in self.procs.values():
            try:
                self.worker_pids.update(c.pid for c in psutil.Process(p.pid).children(True))
            except psutil.Error:
                pass
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for pid in self.worker_pids:
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass

    def run_as(self, who: str, *args, timeout: float = 60):
        return subprocess.run(squall_cmd(*args), capture_output=True, text=True,
                              env=self.user_env[who], cwd=str(self.tmp), timeout=timeout)

    def client(self, who: str, timeout: float = 10) -> NimbusClient:
        return NimbusClient(self.users[who], timeout=timeout)

    def channel(self, who: str, port: int | None = None) -> grpc.Channel:
        """A raw gRPC channel with ``who``'s certificate (an attacker's own client)."""
        return grpc.secure_channel(f"127.0.0.1:{port or self.nimbus_port}",
                                   tls.channel_credentials(self.users[who]))

    # --- the daemons -----------------------------------------------------------------
    def drpc_up_unserved_secs(self) -> None:
        """Wait until the DRPC server refuses functions no spout asked for (it has been up
        UNSERVED_SECS); at most UNSERVED_SECS, once per file."""
        poll_for(lambda: time.monotonic() > self.drpc_started + UNSERVED_SECS + 0.1,
                 timeout=UNSERVED_SECS + 1, interval=0.1, what="the DRPC server up 10 s")

    def daemon_pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.procs.items()}

    def rss(self) -> dict[str, int]:
        return {name: psutil.Process(pid).memory_info().rss
                for name, pid in self.daemon_pids().items()}

    def leader_lines(self) -> int:
        return (self.tmp / "nimbus.log").read_text(errors="replace").count("is the leader")

    # --- the victim: alice's word count ------------------------------------------------
    def submit_victim(self):
        poll_for(lambda: "2 supervisor(s), 0/4 slots used" in self.run("list").stdout,
                 timeout=20, what="2 supervisors registered\n" + self.logs())
        r = self.run_as("alice", "jar", EXAMPLES, "word_count", "-c", "wordcount.sentences=0",
                        "-c", f"topology.stats.freq.secs={STATS_SECS}")
        assert r.returncode == 0, r.stdout + r.stderr + self.logs()
        poll_for(lambda: len(self.victim_workers()) == 2 and
                 all(n > 100 for n in self.victim_acks().values()),
                 timeout=30, what="alice's word count acking on 2 workers\n" + self.logs())
        poll_for(self.reported_acks, timeout=10 * REPORT_SECS,
                 what="acks reported to Nimbus by the supervisors")

    def _victim_dirs(self):
        for d in self.sup_dirs:
            yield from glob.glob(str(d / "workers" / "word-count-*"))

    def victim_heartbeats(self) -> dict[tuple[str, int], dict]:
        """(host, port) -> the latest heartbeat of alice's worker in that slot."""
        out = {}
        for wdir in self._victim_dirs():
            try:
                with open(os.path.join(wdir, "assignment.json")) as fh:
                    a = json.load(fh)
                with open(os.path.join(wdir, "heartbeat.json")) as fh:
                    out[(a["host"], int(a["port"]))] = json.load(fh)
            except (OSError, ValueError):
                continue
        return out

    def victim_workers(self) -> dict[tuple[str, int], int]:
        """(host, port) -> the pid of alice's live worker in that slot (a dead worker's
        heartbeat file stays until its restart: it is left out)."""
        return {slot: int(hb["pid"]) for slot, hb in self.victim_heartbeats().items()
                if _alive(int(hb["pid"]))}

    def victim_acks(self) -> dict[tuple[str, int], int]:
        """(host, port) -> the acks of the word count's spout tasks in that worker."""
        return {slot: sum(s.get("acked", 0) for s in hb.get("tasks", {}).values()
                          if s.get("component") == "sentences")
                for slot, hb in self.victim_heartbeats().items()}

    def victim_failed(self) -> int:
        """Trees the word count's spouts saw fail or time out."""
        return sum(s.get("failed", 0) + s.get("timed_out", 0)
                   for hb in self.victim_heartbeats().values()
                   for s in hb.get("tasks", {}).values() if s.get("component") == "sentences")

    def reported_acks(self, client: NimbusClient | None = None) -> int:
        """The word count's spout acks as Nimbus knows them (from the supervisors' reports),
        asked by alice (on ``client``, or on a new connection)."""
        if client is None:
            with self.client("alice") as alice:
                return self.reported_acks(alice)
        return sum(e.acked for e in client.topology_info(name="word-count").executors
                   if e.component_id == "sentences")

    def victim_tid(self) -> str:
        with self.client("alice") as alice:
            return next(t.id for t in alice.list().topologies if t.name == "word-count")

    def send_errors(self) -> float:
        """Failed reports to Nimbus, as the supervisors count them on their /metrics."""
        total = 0.0
        for port in self.sup_metrics:
            fam = self.metrics(port)["squall_supervisor_heartbeat_send_errors"]
            total += sum(s.value for s in fam.samples if s.name.endswith("_total"))
        return total

    # --- other users' topologies ---------------------------------------------------------
    def jar_file(self, who: str, name: str, source: str):
        path = self.tmp / f"{who}-{name}" / f"{name}.py"
        path.parent.mkdir()
        path.write_text(source)
        r = self.run_as(who, "jar", str(path))
        assert r.returncode == 0, r.stdout + r.stderr + self.logs()

    def kill_and_wait(self, who: str, name: str) -> None:
        """Kill ``who``'s topology at once; return when Nimbus removed it and its slots are
        free again (its workers stop in the background; the next probe may need a slot)."""
        with self.client(who) as client:
            client.kill(name, wait_secs=0)

            def removed():
                info = client.list()
                return name not in {t.name for t in info.topologies} and \
                    sum(s.num_used_slots for s in info.supervisors) == 2
            poll_for(removed, timeout=10 * MONITOR_SECS, interval=0.2,
                     what=f"{name} removed and its slot free\n" + self.logs())


SUPERVISOR_LOGS = ("supervisor1.log", "supervisor2.log")


class RssWatch:
    """Samples each daemon's RSS every 0.1 s on a thread; ``peaks`` is the most seen."""

    def __init__(self, pids: dict[str, int]):
        self.procs = {name: psutil.Process(pid) for name, pid in pids.items()}
        self.peaks = {name: p.memory_info().rss for name, p in self.procs.items()}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for name, p in self.procs.items():
                try:
                    self.peaks[name] = max(self.peaks[name], p.memory_info().rss)
                except psutil.Error:
                    pass  # a daemon that died fails the checks after the probe

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join(5)
        return self.peaks


class Probe:
    """The victim as it was before a probe, and the daemons' RSS during it."""

    def __init__(self, c: AbuseCluster, name: str):
        self.c, self.name = c, name
        self.workers = c.victim_workers()
        assert len(self.workers) == 2, self.workers
        self.slots = set(self.workers)
        # (Reports sent before Nimbus listened at the cluster's start failed: not the probe's.)
        self.send_errors = c.send_errors()
        self.sup_log_sizes = {n: (c.tmp / n).stat().st_size for n in SUPERVISOR_LOGS}
        self.rss = RssWatch(c.daemon_pids())
        #: The daemons' RSS at the start, and how far above it each may go (RSS_MARGIN).
        self.rss_start = dict(self.rss.peaks)
        self.margins = {name: RSS_MARGIN for name in self.rss_start}
        self.checked = False

    def victim_unharmed(self) -> None:
        c = self.c
        peaks = self.rss.stop()
        t0 = time.monotonic()
        # Still acking in each of its workers, the same processes in the same slots, and
        # nothing failed.
        assert c.victim_workers() == self.workers, (self.workers, c.victim_workers())
        acked = c.victim_acks()
        poll_for(lambda: (lambda now: all(now.get(w, 0) > acked[w] + 100 for w in self.slots))(
            c.victim_acks()), timeout=10 * (STATS_SECS + 1),
            what="alice's word count still acking in both workers\n" + c.logs())
        assert c.victim_failed() == 0, c.victim_failed()
        assert c.victim_workers() == self.workers, (self.workers, c.victim_workers())
        with c.client("alice") as alice:
            info = alice.topology_info(name="word-count")
        assert {(e.host, e.port) for e in info.executors} == self.slots
        assert (info.status, info.recent_restarts) == ("ACTIVE", 0), info
        # The supervisors' reports reach Nimbus: three more reports' worth of acks, no error.
        seen = [c.reported_acks()]
        poll_for(lambda: seen.append(c.reported_acks()) or len(set(seen)) > 3,
                 timeout=8 * REPORT_SECS, interval=REPORT_SECS / 4,
                 what="reports reaching Nimbus")
        assert seen == sorted(seen), seen
        assert c.send_errors() == self.send_errors
        for name, size in self.sup_log_sizes.items():
            with open(c.tmp / name, errors="replace") as fh:
                fh.seek(size)
                log = fh.read()
            assert "cannot send worker heartbeats" not in log, log[-3000:]
        # Nimbus never lost its leadership; every daemon is alive and stayed in its bounds.
        assert c.leader_lines() == 1, c.logs()
        dead = {n: p.returncode for n, p in c.procs.items() if p.poll() is not None}
        assert not dead, f"daemons exited: {dead}\n" + c.logs()
        over = {n: f"+{(peaks[n] - self.rss_start[n]) / MiB:.0f} MiB" for n in peaks
                if peaks[n] > self.rss_start[n] + self.margins[n]}
        assert not over, f"RSS rose more than {RSS_MARGIN // MiB} MiB (flood: " \
                         f"{FLOOD_RSS_MARGIN // MiB}) during the probe: {over}"
        print(f"\n[{self.name}] victim checked in {time.monotonic() - t0:.1f} s; "
              "RSS MiB, at the start -> peak (the file's baseline): " +
              ", ".join(f"{n} {self.rss_start[n] / MiB:.0f} -> {peaks[n] / MiB:.0f} "
                        f"({c.rss_baseline[n] / MiB:.0f})" for n in sorted(peaks)))
        self.checked = True


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def zk_conf_of(zookeeper) -> dict:
    """zk_fixtures' zk_conf for a module: a root of its own, a locked ZooKeeper."""
    conf = zookeeper.conf(root=f"/squall-abuse-{uuid.uuid4().hex[:12]}")
    conf.update({"storm.zookeeper.auth.payload": f"squall:{uuid.uuid4().hex}",
                 "storm.zookeeper.connection.timeout": 10_000,
                 "storm.zookeeper.session.timeout": int(TEST_SESSION_TIMEOUT * 1000),
                 "storm.zookeeper.retry.interval": 100,
                 "storm.zookeeper.retry.intervalceiling.millis": 1000})
    return conf


@pytest.fixture(scope="module")
def abuse(tmp_path_factory, zookeeper):
    c = AbuseCluster(tmp_path_factory.mktemp("abuse"), zk_conf_of(zookeeper),
                     zookeeper.connect_string)
    c.start()
    try:
        c.submit_victim()
        # Every port used once (the daemons' lazy imports done), then the baseline.
        for port in (c.ui_port, c.lv_port, c.nimbus_metrics, *c.sup_metrics):
            poll_for(lambda: c.http(f"http://127.0.0.1:{port}/")[0] in (200, 404), timeout=20,
                     what=f"port {port} answering\n" + c.logs())
        assert c.ok("topology/summary")["topologies"]
        dead = {n: p.returncode for n, p in c.procs.items() if p.poll() is not None}
        assert not dead, f"daemons exited: {dead}\n" + c.logs()
        c.rss_baseline = c.rss()
        yield c
    finally:
        c.stop()


@pytest.fixture
def probe(abuse, request):
    failed = request.session.testsfailed
    p = Probe(abuse, request.node.name)
    yield p
    p.rss.stop()
    assert p.checked or request.session.testsfailed > failed, \
        "the test never checked the victim (probe.victim_unharmed())"
