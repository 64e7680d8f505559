"""A real cluster across three "hosts" (network namespaces of tests/netns.py): ZooKeeper and
`squall nimbus` on host 0, a `squall supervisor` on each of hosts 1 and 2, set up as
SECURITY.md says (locked ZooKeeper, mutual TLS with a certificate per daemon).

* Worker traffic between hosts is encrypted: a capture on host 1's switch port, taken while
  tuples with a marker cross from one host to the other, never holds the marker, while the
  same topology with ``storm.messaging.curve: false`` (the positive control, running at the
  same time) shows its marker in the same capture.
* A partition: host 2 is cut off mid-run; Nimbus declares its slot dead and moves its
  executors to host 1, every message id is acked (at least once), and once the link is back
  host 2's supervisor rejoins and stops its stale worker.
* A slow link (netem delay) loses no message; skipped where the kernel has no netem. A
  narrow link (tbf, 128 kbit/s, below what the topology sends: queueing and drops) loses
  none either.

The test process is in the root namespace and cannot reach the hosts' addresses: the CLI runs
inside host 0, and results are read from files (the filesystem is shared). Timings are
printed; run with ``-s`` to see them.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections import Counter

import netns
import psutil
import pytest
import yaml
from squall.client.cluster_state import ZooKeeperUnavailable
from squall.deploy.certs import CertificateAuthority
from squall.deploy.zookeeper import installation
from topos import events_of, read_events

pytestmark = pytest.mark.integration

PY = sys.executable
HERE = os.path.dirname(os.path.abspath(__file__))

#: The same ports on every host (each is a namespace of its own).
SLOTS = [6700, 6701, 6702]
NIMBUS_PORT = 6627
METRICS_PORT, NIMBUS_METRICS_PORT, LOGVIEWER_PORT, UI_PORT = 9180, 9181, 8000, 8080
HTTP_TOKEN = uuid.uuid4().hex

# Small timeouts keep the module fast; every wait below is bounded by the ones it depends on.
TASK_TIMEOUT = 3.0        # nimbus.task.timeout.secs: a silent slot is dead after this
NIMBUS_MONITOR = 0.5      # nimbus.monitor.freq.secs
SUP_MONITOR = 1.0         # supervisor.monitor.frequency.secs: full re-read of /assignments
SUP_HEARTBEAT = 0.5       # supervisor.heartbeat.frequency.secs: reports to Nimbus
KILL_GRACE = 1.0          # supervisor.worker.shutdown.sleep.secs
SESSION_TIMEOUT = 4.0     # storm.zookeeper.session.timeout (s); ZooKeeper's tick is 500 ms
MSG_TIMEOUT = 5           # topology.message.timeout.secs of the test topologies
#: A worker process's start (interpreter, imports, CurveZMQ handshake) on a loaded 2-core CI
#: machine; the slack of every wait that includes a launch.
LAUNCH_SLACK = 15.0
#: `squall kill -w 0` removes a topology at once; its workers get SIGTERM at the next sync.
WORKERS_EXIT_BOUND = SUP_MONITOR + KILL_GRACE + 10.0

CONF = {
    "nimbus.grpc.port": NIMBUS_PORT,
    "nimbus.monitor.freq.secs": NIMBUS_MONITOR,
    "nimbus.task.timeout.secs": TASK_TIMEOUT,
    "nimbus.task.launch.secs": 10,
    "supervisor.monitor.frequency.secs": SUP_MONITOR,
    "supervisor.heartbeat.frequency.secs": SUP_HEARTBEAT,
    "supervisor.worker.shutdown.sleep.secs": KILL_GRACE,
    "supervisor.worker.timeout.secs": 10,
    "storm.zookeeper.session.timeout": int(SESSION_TIMEOUT * 1000),
    "storm.zookeeper.connection.timeout": 10_000,
    "storm.zookeeper.retry.interval": 100,
    "storm.zookeeper.retry.intervalceiling.millis": 1000,
}


# --- the cluster ----------------------------------------------------------------------------
class CrossHostCluster:
    """ZooKeeper and Nimbus on ``hosts[0]``, a supervisor on each other host."""

    def __init__(self, hosts: netns.Hosts, tmp):
        self.hosts, self.tmp = hosts, tmp
        self.h0 = hosts[0]
        self.sup_hosts = list(hosts)[1:]
        self.sup_dirs = [tmp / f"sup{h.index}" for h in self.sup_hosts]
        self.daemons: dict[str, subprocess.Popen] = {}
        #: Every worker pid seen (heartbeats, the supervisors' children): none may survive.
        self.worker_pids: set[int] = set()
        self.zk: subprocess.Popen | None = None

    # -- start / stop --
    def start(self) -> None:
        self.start_zookeeper()
        ca = CertificateAuthority(str(self.tmp / "pki"))
        conf = dict(CONF)
        conf.update({"storm.zookeeper.servers": [self.h0.ip],
                     "storm.zookeeper.port": self.zk_port,
                     "storm.zookeeper.root": f"/squall-xhost-{uuid.uuid4().hex[:8]}",
                     "storm.zookeeper.auth.payload": f"squall:{uuid.uuid4().hex}",
                     "nimbus.seeds": [self.h0.ip],
                     "nimbus.supervisor.users": ["supervisor"],
                     "nimbus.daemon.users": ["nimbus"],
                     "squall.http.token.file": str(self.tmp / "http.token")})
        (self.tmp / "http.token").write_text(HTTP_TOKEN + "\n")
        self.tester = ca.issue("tester")
        conf.update(self.tester.conf())  # the CLI's user
        self.ca = ca
        self.conf = conf
        self.yaml = self.tmp / "squall.yaml"
        self.yaml.write_text(yaml.safe_dump(conf))
        self.env = dict(os.environ, SQUALL_CONF=str(self.yaml))
        # Nimbus's certificate names host 0's address: the clients dial it and check.
        # As the README's cluster section: host 0's certificate (Nimbus's) serves its ports,
        # each other host has one for its own address (make-certs.sh --supervisor NAME@ADDR)
        # that serves its /metrics and logviewer over HTTPS and calls Nimbus as "supervisor".
        self.host_tls = {self.h0.index: ca.issue("nimbus", hosts=[self.h0.ip],
                                                 server=True).conf()}
        for h in self.sup_hosts:
            self.host_tls[h.index] = ca.issue("supervisor", hosts=[h.ip], server=True,
                                              file_stem=f"supervisor-{h.ip}").conf()
        self.start_daemon("nimbus", self.h0, "nimbus", self.host_tls[self.h0.index],
                          {"storm.local.dir": self.tmp / "nimbus",
                           "storm.local.hostname": self.h0.ip,
                           "nimbus.metrics.port": NIMBUS_METRICS_PORT,
                           "squall.metrics.host": self.h0.ip})
        for h, d in zip(self.sup_hosts, self.sup_dirs):
            self.start_daemon(f"supervisor{h.index}", h, "supervisor", self.host_tls[h.index],
                              {"storm.local.dir": d, "storm.local.hostname": h.ip,
                               "supervisor.slots.ports": json.dumps(SLOTS),
                               "supervisor.metrics.port": METRICS_PORT,
                               "squall.metrics.host": h.ip})
            self.start_daemon(f"logviewer{h.index}", h, "logviewer", self.host_tls[h.index],
                              {"storm.local.dir": d, "logviewer.host": h.ip,
                               "logviewer.port": LOGVIEWER_PORT})
        self.start_daemon("ui", self.h0, "ui", self.host_tls[self.h0.index],
                          {"storm.local.dir": self.tmp / "nimbus", "ui.host": self.h0.ip,
                           "ui.port": UI_PORT, "logviewer.port": LOGVIEWER_PORT,
                           "logviewer.host": self.h0.ip, "storm.local.hostname": self.h0.ip})
        n = len(self.sup_hosts)
        self.wait(lambda: f"{n} supervisor(s), 0/{n * len(SLOTS)} slots used" in self.list_out(),
                  30, f"{n} supervisors registered")

    def start_zookeeper(self) -> None:
        with open(self.tmp / "zookeeper-wrapper.log", "ab") as log:
            self.zk = self.h0.popen([PY, "-m", "squall.deploy.zookeeper", "--port", "0",
                                     "--host", self.h0.ip], stdout=subprocess.PIPE,
                                    stderr=log, text=True, cwd=str(self.tmp))
        line = netns.readline(self.zk, timeout=60)
        m = re.search(rf"serving on {re.escape(self.h0.ip)}:(\d+)", line)
        assert m, f"ZooKeeper did not start: {line!r}\n{self.logs()}"
        self.zk_port = int(m.group(1))

    def start_daemon(self, name, host, kind, tls, conf) -> None:
        args = [f"-c{k}={v}" for k, v in {**tls, **conf}.items()]
        with open(self.tmp / f"{name}.log", "ab") as log:
            self.daemons[name] = host.popen([PY, "-m", "squall.cli", kind, *args], stdout=log,
                                            stderr=log, env=self.env, cwd=str(self.tmp))

    def stop(self) -> list[int]:
        """SIGTERM the supervisors (they stop their workers), then Nimbus, then ZooKeeper;
        SIGKILL after a bound. Returns the worker pids still alive after the supervisors."""
        self.note_worker_pids()
        sups = [p for n, p in self.daemons.items() if n.startswith("supervisor")]
        netns.stop_children(sups, KILL_GRACE + 15)
        survivors = sorted(p for p in self.worker_pids if netns.alive(p))
        netns.stop_children([p for n, p in self.daemons.items()
                             if not n.startswith("supervisor")], 15)
        if self.zk is not None:
            netns.stop_children([self.zk], 15)
        return survivors

    # -- the CLI, inside host 0 --
    def squall(self, *args, timeout=60) -> subprocess.CompletedProcess:
        return self.h0.run([PY, "-m", "squall.cli", *map(str, args)], capture_output=True,
                           text=True, env=self.env, cwd=str(self.tmp), timeout=timeout)

    def list_out(self) -> str:
        r = self.squall("list")
        return r.stdout if r.returncode == 0 else ""

    def listed(self) -> dict[str, list[str]]:
        rows = {}
        for line in self.list_out().splitlines()[1:]:
            cols = line.split()
            if len(cols) == 7:
                rows[cols[0]] = cols
        return rows

    def supervisors_listed(self) -> int | None:
        m = re.search(r"^(\d+) supervisor\(s\)", self.list_out(), re.MULTILINE)
        return int(m.group(1)) if m else None

    def jar(self, pkg, kind, name, **conf) -> str:
        """Submit; returns the topology id."""
        r = self.squall("jar", pkg, "cross_host_topos", kind, name,
                        *[a for k, v in conf.items() for a in ("-c", f"{k}={v}")])
        assert r.returncode == 0, r.stdout + r.stderr + self.logs()
        m = re.search(rf"as ({re.escape(name)}-\S+)", r.stdout)
        assert m, r.stdout
        return m.group(1)

    def kill(self, name) -> None:
        pids = {w["pid"] for ws in self.workers(name).values() for w in ws}
        r = self.squall("kill", name, "-w", "0")
        assert r.returncode == 0, r.stdout + r.stderr
        self.wait(lambda: not any(netns.alive(p) for p in pids), WORKERS_EXIT_BOUND,
                  f"the workers of {name} to exit")

    def kill_all(self) -> None:
        for name in self.listed():
            self.squall("kill", name, "-w", "0")

    # -- what the supervisors' files say (shared filesystem) --
    def workers(self, tid_or_name: str) -> dict[int, list[dict]]:
        """host index -> the topology's workers there with an assignment: ``{"port", "dir",
        "pid", "tasks": {task: component}, "running"}`` (pid/tasks from the heartbeat)."""
        out: dict[int, list[dict]] = {}
        for h, d in zip(self.sup_hosts, self.sup_dirs):
            for wdir in sorted(glob.glob(str(d / "workers" / f"{tid_or_name}-*"))):
                if not os.path.exists(os.path.join(wdir, "assignment.json")):
                    continue
                w = {"port": int(wdir.rsplit("-", 1)[1]), "dir": wdir, "pid": None,
                     "tasks": {}, "running": False}
                try:
                    with open(os.path.join(wdir, "heartbeat.json")) as fh:
                        hb = json.load(fh)
                    w["pid"] = int(hb["pid"])
                    w["tasks"] = {int(t): s.get("component") for t, s in hb["tasks"].items()}
                    w["running"] = hb.get("state") == "running" and netns.alive(w["pid"])
                    self.worker_pids.add(w["pid"])
                except (OSError, ValueError, KeyError):
                    pass
                out.setdefault(h.index, []).append(w)
        return out

    def note_worker_pids(self) -> None:
        for name, p in self.daemons.items():
            if name.startswith("supervisor"):
                try:
                    self.worker_pids.update(c.pid for c in psutil.Process(p.pid).children(True))
                except psutil.Error:
                    pass

    def wait(self, predicate, timeout: float, what):
        """``predicate()``'s first truthy value, polled; after ``timeout`` s the test fails
        with ``what`` (a string, or a callable evaluated then) and the logs' tails."""
        deadline = time.monotonic() + timeout
        while not (value := predicate()):
            if time.monotonic() > deadline:
                detail = what() if callable(what) else what
                pytest.fail(f"timed out after {timeout:g} s waiting for {detail}\n{self.logs()}")
            time.sleep(0.05)
        return value

    def logs(self) -> str:
        out = []
        paths = sorted(self.tmp.glob("*.log")) + sorted(self.tmp.glob("sup*/logs/*.log"))
        for p in paths:
            out.append(f"--- {p} ---\n" + p.read_text(errors="replace")[-2500:])
        return "\n".join(out)


def spread_one_per_host(c: CrossHostCluster, name: str, running: bool = True):
    """The topology's workers, if it has exactly one on each supervisor host (running, with a
    heartbeat, when ``running``); else None."""
    ws = c.workers(name)
    if sorted(ws) != [h.index for h in c.sup_hosts] or any(len(v) != 1 for v in ws.values()):
        return None
    if running and not all(v[0]["running"] for v in ws.values()):
        return None
    return {h: v[0] for h, v in ws.items()}


def write_package(path):
    """A package dir for `squall jar`: topos.py and cross_host_topos.py."""
    path.mkdir()
    for f in ("topos.py", "cross_host_topos.py"):
        shutil.copy(os.path.join(HERE, f), path / f)
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if (reason := netns.available()) is not None:
        pytest.skip(reason)
    try:
        installation()
    except ZooKeeperUnavailable as e:
        pytest.skip(str(e))
    tmp = tmp_path_factory.mktemp("xhost")
    with netns.Hosts(3) as hosts:
        c = CrossHostCluster(hosts, tmp)
        survivors: list[int] = []
        try:
            t0 = time.monotonic()
            c.start()
            print(f"\ncluster across {len(hosts)} hosts up in {time.monotonic() - t0:.1f} s")
            yield c
        finally:
            survivors = c.stop()
    assert not survivors, f"worker pids alive after their supervisors stopped: {survivors}"
    assert not [p for p in c.worker_pids if netns.alive(p)]
    assert not [n for n in netns.list_netns() if n.startswith(hosts.prefix)]


@pytest.fixture
def c(cluster):
    """The module's cluster, with no topology left by the test."""
    yield cluster
    cluster.kill_all()


# --- packets --------------------------------------------------------------------------------
def tcp_segments(frames):
    """(src ip, src port, dst ip, dst port, payload) of every IPv4 TCP segment with data."""
    for f in frames:
        if len(f) < 34 or f[12:14] != b"\x08\x00":
            continue
        ip = f[14:]
        ihl = (ip[0] & 0x0F) * 4
        if ip[9] != 6 or len(ip) < ihl + 20:
            continue
        total = struct.unpack_from("!H", ip, 2)[0]
        end = total if ihl < total <= len(ip) else len(ip)  # GSO frames may say 0
        tcp = ip[ihl:end]
        sport, dport = struct.unpack_from("!HH", tcp, 0)
        payload = tcp[(tcp[12] >> 4) * 4:]
        if payload:
            yield (socket.inet_ntoa(ip[12:16]), sport, socket.inet_ntoa(ip[16:20]), dport,
                   payload)


def worker_streams(frames, endpoints):
    """The TCP payload of the connections to or from any of ``endpoints`` ({(ip, port)}), one
    byte string per direction of each connection, in capture order (a marker split between
    two segments is still found)."""
    streams: dict[tuple, bytearray] = {}
    for src, sport, dst, dport, payload in tcp_segments(frames):
        if (src, sport) in endpoints or (dst, dport) in endpoints:
            streams.setdefault((src, sport, dst, dport), bytearray()).extend(payload)
    return {k: bytes(v) for k, v in streams.items()}


# --- 1. encrypted worker traffic --------------------------------------------------------------
def test_worker_traffic_between_hosts_is_encrypted(c, tmp_path):
    if (reason := netns.capture_available()) is not None:
        pytest.skip(reason)
    pkg = write_package(tmp_path / "pkg")
    # The same topology twice, at the same time: with CurveZMQ (the default) and without.
    curve = {"crypt": True, "plain": False}
    keys = {name: uuid.uuid4().hex for name in curve}
    markers = {name: f"SQUALLPLAINTEXT-{keys[name]}-".encode() for name in curve}
    events = {name: tmp_path / f"events-{name}" for name in curve}
    for name, on in curve.items():
        events[name].mkdir()
        c.jar(pkg, "marker", name, **{"test.marker.key": keys[name],
                                      "storm.messaging.curve": str(on).lower(),
                                      "test.events.dir": events[name],
                                      "test.spout.rate": 200, "topology.stats.freq.secs": 0.2,
                                      "topology.message.timeout.secs": MSG_TIMEOUT})
    # Two workers each, one per host (the scheduler spreads over supervisors).
    placed = {name: c.wait(lambda n=name: spread_one_per_host(c, n), LAUNCH_SLACK,
                           f"{name}: one running worker on each host")
              for name in curve}

    def remote_sink_tasks(name):
        """The sink tasks on the host without the spout: what they get crossed the wire."""
        ws = placed[name]
        (spout_host,) = [h for h, w in ws.items() if "marker" in w["tasks"].values()]
        return {t for h, w in ws.items() if h != spout_host
                for t, comp in w["tasks"].items() if comp == "sink"}

    remote = {name: remote_sink_tasks(name) for name in curve}
    assert all(remote.values()), placed

    def crossed(name):
        """Marker tuples the remote sink tasks executed."""
        evs = read_events(str(events[name]))
        return sum(1 for (comp, task), es in evs.items() if comp == "sink" and task in remote[name]
                   for kind, payload in es if kind == "got"
                   and payload.encode().startswith(markers[name]))

    c.wait(lambda: all(crossed(n) > 0 for n in curve), LAUNCH_SLACK, "tuples crossing hosts")
    start = {n: crossed(n) for n in curve}
    t0 = time.monotonic()
    # Record host 1's switch port while at least 300 more tuples of each topology cross
    # (the spouts emit 200/s, about half to the remote sink: ~3 s).
    with c.hosts[1].capture() as cap:
        c.wait(lambda: all(crossed(n) >= start[n] + 300 for n in curve), 20,
               "300 tuples crossing during the capture")
    secs = time.monotonic() - t0
    during = {n: crossed(n) - start[n] for n in curve}

    streams = {}
    for name in curve:
        endpoints = {(c.hosts[h].ip, w["port"]) for h, w in placed[name].items()}
        streams[name] = worker_streams(cap.frames, endpoints)
    volume = {n: sum(len(s) for s in streams[n].values()) for n in curve}
    seen = {n: cap.data.count(markers[n]) for n in curve}
    in_streams = {n: sum(s.count(markers[n]) for s in streams[n].values()) for n in curve}
    report = (f"captured {len(cap.frames)} frames, {len(cap.data)} bytes in {secs:.1f} s on "
              f"{c.hosts[1].iface}; worker TCP payload {volume}; tuples crossed {during}; "
              f"marker occurrences in frames {seen}, in worker streams {in_streams}")
    print("\n" + report)
    # Both topologies' worker connections carried their tuples during the capture ...
    for name in curve:
        assert volume[name] >= during[name] * 20, report
    # ... the plaintext control shows its marker on the wire (the capture does see tuples) ...
    assert in_streams["plain"] >= during["plain"] // 2, report
    # ... and the encrypted one never does, in any frame or reassembled stream.
    assert seen["crypt"] == 0 and in_streams["crypt"] == 0, report
    for name in curve:
        c.kill(name)


# --- 2. every HTTPS port with the cluster's CA, and a log on another host from the UI --------
#: GET a URL over HTTPS trusting only the cluster's CA, with the cluster's token (Prometheus's
#: view of a scrape target); run inside a host's namespace.
FETCH = r"""
import ssl, sys, urllib.request
ca, token, url = sys.argv[1:4]
ctx = ssl.create_default_context(cafile=ca)
req = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
    sys.stdout.write(resp.read().decode())
"""
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def https_get(c: CrossHostCluster, host, url: str) -> str | None:
    r = host.run([PY, "-c", FETCH, c.conf["squall.tls.ca.file"], HTTP_TOKEN, url],
                 capture_output=True, text=True, timeout=30)
    return r.stdout if r.returncode == 0 else None


def browser_in(c: CrossHostCluster, host, tmp_path):
    """(executable, env) of a Chromium that runs inside ``host``'s namespace and trusts the
    cluster's CA as an operator's browser does once it is imported (README: its NSS
    database, `certutil -A -t C,,`), and nothing else added."""
    home = tmp_path / "home"
    nssdb = home / ".pki" / "nssdb"
    nssdb.mkdir(parents=True)
    subprocess.run(["certutil", "-N", "-d", f"sql:{nssdb}", "--empty-password"], check=True)
    subprocess.run(["certutil", "-A", "-d", f"sql:{nssdb}", "-t", "C,,", "-n", "squall-ca",
                    "-i", c.conf["squall.tls.ca.file"]], check=True)
    # Playwright talks to the browser over inherited pipes, which `ip netns exec` keeps.
    wrapper = tmp_path / "chromium-in-netns"
    wrapper.write_text(f"#!/bin/sh\nexec {netns.IP} netns exec {host.name} {CHROMIUM} \"$@\"\n")
    wrapper.chmod(0o755)
    return str(wrapper), dict(os.environ, HOME=str(home))


def test_every_https_port_serves_with_the_clusters_ca_and_the_ui_opens_another_hosts_log(
        c, tmp_path):
    """Issue 25's operator: host certificates from make-certs.sh serve each supervisor's
    /metrics and logviewer over HTTPS that Prometheus (the CA, the token) accepts; a daemon
    given a certificate that cannot serve refuses to start in one line; the UI on host 0
    opens a worker's log on another host's logviewer in a browser that trusts the CA (the
    link is signed: the browser has no cookie for that host)."""
    from prometheus_client.parser import text_string_to_metric_families

    h0 = c.h0
    h1 = c.sup_hosts[0]
    # Every HTTPS port of the README's cluster, from another host: Nimbus's /metrics and the
    # UI's (host 0's certificate), each supervisor's /metrics and logviewer (its own).
    for url, family in ((f"https://{h0.ip}:{NIMBUS_METRICS_PORT}/metrics", "squall_nimbus"),
                        (f"https://{h0.ip}:{UI_PORT}/metrics", "squall_ui")):
        text = c.wait(lambda url=url: https_get(c, h1, url), LAUNCH_SLACK, url)
        names = {f.name for f in text_string_to_metric_families(text)}
        assert any(n.startswith(family) for n in names), (url, sorted(names)[:20])
    for h in c.sup_hosts:
        text = c.wait(lambda h=h: https_get(c, h0, f"https://{h.ip}:{METRICS_PORT}/metrics"),
                      LAUNCH_SLACK, f"host {h.index}'s supervisor /metrics over HTTPS")
        names = {f.name for f in text_string_to_metric_families(text)}
        assert any(n.startswith("squall_supervisor") for n in names), sorted(names)[:20]
        assert "<title>" in c.wait(
            lambda h=h: https_get(c, h0, f"https://{h.ip}:{LOGVIEWER_PORT}/"), LAUNCH_SLACK,
            f"host {h.index}'s logviewer over HTTPS")

    # A user's (client-only) certificate cannot serve: the logviewer says so and exits.
    r = h1.run([PY, "-m", "squall.cli", "logviewer",
                *[f"-c{k}={v}" for k, v in {**c.tester.conf(), "logviewer.host": h1.ip,
                                             "logviewer.port": LOGVIEWER_PORT + 1,
                                             "storm.local.dir": tmp_path}.items()]],
               capture_output=True, text=True, env=c.env, timeout=60)
    said = [ln for ln in (r.stdout + r.stderr).splitlines() if c.tester.cert in ln]
    assert r.returncode != 0 and len(said) == 1, r.stdout + r.stderr
    assert "client-only" in said[0] and f"{h1.ip}:{LOGVIEWER_PORT + 1}" in said[0], said[0]
    assert "Traceback" not in r.stderr, r.stderr

    if not os.path.exists(CHROMIUM) or shutil.which("certutil") is None:
        pytest.skip("the browser half needs Debian's chromium and libnss3-tools (certutil): "
                    "run scripts/setup.sh --with-browser")
    pytest.importorskip("playwright.sync_api")
    from playwright.sync_api import sync_playwright

    pkg = write_package(tmp_path / "pkg")
    tid = c.jar(pkg, "marker", "logs", **{"test.marker.key": "logs", "test.spout.rate": 20,
                                          "test.events.dir": tmp_path,
                                          "topology.message.timeout.secs": MSG_TIMEOUT})
    placed = c.wait(lambda: spread_one_per_host(c, "logs"), LAUNCH_SLACK,
                    "logs: one running worker on each host")
    far = c.sup_hosts[-1]  # the log to open lives on this host, the UI on host 0
    far_port = placed[far.index]["port"]
    login = f"https://{h0.ip}:{UI_PORT}/?token={HTTP_TOKEN}"
    executable, env = browser_in(c, h0, tmp_path)
    (tmp_path / "profile").mkdir()
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=executable, headless=True, env=env,
            args=CHROMIUM_ARGS)
        try:
            ctx.set_default_timeout(int(LAUNCH_SLACK * 1000))
            page = ctx.pages[0] if ctx.pages else ctx.new_page()
            page.goto(login)  # no certificate error: the CA is trusted, nothing is ignored
            page.goto(f"https://{h0.ip}:{UI_PORT}/#/topology/{tid}")
            link = page.locator(f"#workers a[href^='https://{far.ip}:{LOGVIEWER_PORT}/log?']")
            link.first.wait_for()  # the page has polled the REST API and drawn the workers
            hrefs = [link.nth(i).get_attribute("href") for i in range(link.count())]
            assert HTTP_TOKEN not in " ".join(hrefs) and all("&sig=" in u for u in hrefs)
            mine = page.locator(f"#workers tr:has-text('{far_port}') "
                                f"a[href^='https://{far.ip}:{LOGVIEWER_PORT}/log?']")
            with ctx.expect_page() as opened:
                mine.first.click()  # target=_blank: a new tab on the other host
            log_page = opened.value
            log_page.wait_for_load_state()
            body = log_page.locator("#log").inner_text()
            assert tid in body or "logs" in body, body[:2000]
            # The signed link logged the browser in there: the page's own search works.
            log_page.locator("input[name=q]").fill("worker")
            log_page.locator("form button").click()
            log_page.wait_for_url("**q=worker**")
            assert log_page.locator("#log mark").count() > 0, log_page.content()[:2000]
        finally:
            ctx.close()
    c.kill("logs")


# --- 3. slow links ------------------------------------------------------------------------------
SLOW_MESSAGES, SLOW_RATE = 600, 100


def test_slow_link_loses_no_message(c, tmp_path):
    if (reason := netns.netem_available()) is not None:
        pytest.skip(reason)
    h1 = c.sup_hosts[0]
    n_sups = len(c.sup_hosts)
    c.wait(lambda: f"{n_sups} supervisor(s), 0/" in c.list_out(), SESSION_TIMEOUT + 10,
           "a cluster with every supervisor and no topology")
    h1.netem(delay_ms=50)  # +100 ms on every round trip through host 1, both ways
    try:
        t0 = time.monotonic()
        tid, _, acks = submit_numbered(c, tmp_path, "slow", count=SLOW_MESSAGES, rate=SLOW_RATE)
        c.wait(lambda: spread_one_per_host(c, tid), LAUNCH_SLACK,
               "one running worker on each host")
        c.wait(lambda: not missing(acks, SLOW_MESSAGES),
               SLOW_MESSAGES / (2 * SLOW_RATE) + 2 * MSG_TIMEOUT + LAUNCH_SLACK,
               lambda: f"every msg id acked over the slow link; missing "
                       f"{missing(acks, SLOW_MESSAGES)[:20]}")
        print(f"\n50 ms netem delay on host 1: all {SLOW_MESSAGES} ids acked "
              f"{time.monotonic() - t0:.2f} s after the submit ({len(acks())} acks)")
    finally:
        h1.clear_netem()
    c.kill("slow")


def test_narrow_link_loses_no_message(c, tmp_path):
    """Host 1's link narrowed to 128 kbit/s both ways (tbf): tuples, acks, heartbeats and the
    package download queue behind each other, tens to hundreds of ms; nothing is lost."""
    h1 = c.sup_hosts[0]
    n_sups = len(c.sup_hosts)
    c.wait(lambda: f"{n_sups} supervisor(s), 0/" in c.list_out(), SESSION_TIMEOUT + 10,
           "a cluster with every supervisor and no topology")
    try:
        h1.shape(rate_kbit=128)
    except netns.NetnsError as e:
        pytest.skip(f"the kernel cannot shape a link: {e}")
    try:
        t0 = time.monotonic()
        tid, _, acks = submit_numbered(c, tmp_path, "narrow", count=SLOW_MESSAGES,
                                       rate=SLOW_RATE)
        c.wait(lambda: spread_one_per_host(c, tid), 2 * LAUNCH_SLACK,
               "one running worker on each host")
        c.wait(lambda: not missing(acks, SLOW_MESSAGES),
               SLOW_MESSAGES / (2 * SLOW_RATE) + 2 * MSG_TIMEOUT + LAUNCH_SLACK,
               lambda: f"every msg id acked over the narrow link; missing "
                       f"{missing(acks, SLOW_MESSAGES)[:20]}")
        print(f"\n128 kbit/s on host 1: all {SLOW_MESSAGES} ids acked "
              f"{time.monotonic() - t0:.2f} s after the submit ({len(acks())} acks)")
    finally:
        h1.clear_shape()
    c.kill("narrow")


# --- 4. partition (last: it leaves host 2 rejoining) ------------------------------
MESSAGES, RATE = 1500, 150  # msg ids, and per spout task per second (2 tasks): ~5 s of input


def submit_numbered(c, tmp_path, name, count=MESSAGES, rate=RATE):
    events = tmp_path / f"events-{name}"
    events.mkdir()
    pkg = write_package(tmp_path / f"pkg-{name}")
    tid = c.jar(pkg, "numbered", name, **{
        "test.events.dir": events, "test.spout.count": count, "test.spout.rate": rate,
        "topology.max.spout.pending": 200, "topology.message.timeout.secs": MSG_TIMEOUT,
        "topology.stats.freq.secs": 0.2})

    def acks():
        return [int(i) for i in events_of(str(events), "numbers", "ack")]

    return tid, events, acks


def missing(acks, count=MESSAGES):
    return sorted(set(range(count)) - set(acks()))


def on_host(c, tid, host, n, running=False):
    """The topology's workers on ``host`` if there are ``n`` (all running, if asked)."""
    ws = c.workers(tid).get(host.index, [])
    return ws if len(ws) == n and (not running or all(w["running"] for w in ws)) else None


def test_partition_moves_executors_and_loses_no_message(c, tmp_path):
    h1, h2 = c.sup_hosts
    n_sups = len(c.sup_hosts)
    c.wait(lambda: f"{n_sups} supervisor(s), 0/" in c.list_out(), 10,
           "a cluster with every supervisor and no topology")
    tid, events, acks = submit_numbered(c, tmp_path, "parted")
    before = c.wait(lambda: spread_one_per_host(c, tid), LAUNCH_SLACK,
                    "one running worker on each host")
    c.wait(lambda: len(set(acks())) >= MESSAGES // 5, LAUNCH_SLACK, "the first acks")
    victim, kept = before[h2.index], before[h1.index]
    acked_at_cut = len(set(acks()))
    assert acked_at_cut < MESSAGES * 0.8, "the run was nearly over before the partition"

    t_down = time.monotonic()
    h2.link_down()
    try:
        # Nimbus stops hearing host 2's supervisor: after nimbus.task.timeout.secs its slot is
        # dead and, at the next monitor round, its executors go to a free slot of host 1.
        moved = c.wait(lambda: on_host(c, tid, h1, 2),
                       TASK_TIMEOUT + NIMBUS_MONITOR + SUP_MONITOR + 5,
                       "both workers assigned to host 1")
        t_moved = time.monotonic() - t_down
        # Not before the timeout: the last report reached Nimbus at most about one
        # supervisor.heartbeat.frequency.secs before the cut.
        assert t_moved >= TASK_TIMEOUT - 2 * SUP_HEARTBEAT, t_moved
        assert kept["port"] in {w["port"] for w in moved}, moved
        # ZooKeeper expires the partitioned supervisor's session: the summary drops it.
        c.wait(lambda: c.supervisors_listed() == n_sups - 1, SESSION_TIMEOUT + 5,
               "host 2's supervisor gone from `squall list`")
        t_gone = time.monotonic() - t_down
        # Every message id acked: the moved spout task starts its share again, and trees
        # lost with host 2 fail within twice topology.message.timeout.secs of their emit
        # (Storm's spout buckets) and are replayed.
        c.wait(lambda: not missing(acks), 3 * MSG_TIMEOUT + MESSAGES / RATE + LAUNCH_SLACK,
               lambda: f"every msg id acked; {len(missing(acks))} missing, e.g. "
                       f"{missing(acks)[:20]}")
        t_acked = time.monotonic() - t_down
        # Cut off, host 2's supervisor cannot learn its worker lost its assignment.
        stale_alive = netns.alive(victim["pid"])
    finally:
        h2.link_up()
    t_up = time.monotonic()
    c.wait(lambda: c.supervisors_listed() == n_sups, SESSION_TIMEOUT + 10,
           "host 2's supervisor back in `squall list`")
    t_rejoin = time.monotonic() - t_up
    # Back in touch, it reads /assignments and stops the worker that lost its slot ...
    c.wait(lambda: not netns.alive(victim["pid"]), SUP_MONITOR + KILL_GRACE + SESSION_TIMEOUT + 5,
           f"host 2's stale worker (pid {victim['pid']}) stopped")
    t_stale = time.monotonic() - t_up
    # ... and, in the same round, removes its directory.
    c.wait(lambda: not c.workers(tid).get(h2.index), SUP_MONITOR + 5,
           lambda: f"host 2 without a worker of {tid}: {c.workers(tid)}")
    # The surviving worker followed the new assignment instead of being restarted.
    final = c.wait(lambda: on_host(c, tid, h1, 2, running=True), 5,
                   "both workers running on host 1")
    assert kept["pid"] in {w["pid"] for w in final}, (kept, final)
    all_acks = acks()
    dups = sum(n - 1 for n in Counter(all_acks).values() if n > 1)
    fails = events_of(str(events), "numbers", "fail")
    emits = events_of(str(events), "numbers", "emit")
    print(f"\npartition of host 2 at {acked_at_cut}/{MESSAGES} acked: executors moved to host 1 "
          f"{t_moved:.2f} s after the cut (nimbus.task.timeout.secs={TASK_TIMEOUT}), its "
          f"supervisor out of the summary {t_gone:.2f} s after it; all {MESSAGES} ids acked "
          f"{t_acked:.2f} s after it ({len(all_acks)} acks, {dups} duplicate, {len(fails)} "
          f"fails, {len(emits)} emits); link up: supervisor back in the summary {t_rejoin:.2f} "
          f"s, stale worker (alive at link-up: {stale_alive}) stopped {t_stale:.2f} s after it")
    c.kill("parted")
