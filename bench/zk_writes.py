#!/usr/bin/env python3
"""ZooKeeper writes and Nimbus's heartbeat intake with idle workers, with and without the
Topology Master: the write figure must not grow with the workers.

Run from the repo root:  .venv/bin/python bench/zk_writes.py [--quick]

Starts a private ZooKeeper (:class:`~squall.deploy.zookeeper.LocalZooKeeper`), an
in-process Nimbus with its gRPC server and ``--supervisors`` real supervisors (gRPC
fetcher and heartbeat sender, real worker processes), all at the shipped defaults
for ``supervisor.heartbeat.frequency.secs``, ``nimbus.monitor.freq.secs`` and
``supervisor.monitor.frequency.secs``. It then measures, one after the other, with no
topology, with an idle topology of 2 workers and with one of 8 (a spout that emits
nothing and one bolt; the first is killed before the second is submitted). Each
measurement waits until Nimbus has a heartbeat from every worker, lets one-off writes
settle, and counts the write transactions ZooKeeper commits over the window as the
delta of its zxid (the ``srvr`` four-letter word), which every write (create, set,
delete, session open/close) advances by one.

Nimbus's intake over the same window: SendSupervisorWorkerHeartbeats calls, the worker
heartbeats and Topology Master summaries they carry, their TaskStats entries and protobuf
bytes. Each topology runs twice (``--master both``): without its Topology Master (every
worker's heartbeat carries its tasks) and with it (heartbeats carry liveness; one summary
per topology carries the tasks, and only those that changed).

Prints the figures for 0, 2 and 8 workers and the 8-vs-2 ratio of writes on stdout
(progress on stderr) and writes them as JSON to bench/results/zk_writes.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import tempfile
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))

#: The idle topology's code: packed, uploaded to Nimbus and imported by the workers.
IDLE_MODULE = "zk_bench_idle"
IDLE_SOURCE = '''\
"""Idle components for bench/zk_writes.py: the spout emits nothing."""
from squall.client import Bolt, Spout


class IdleSpout(Spout):
    def open(self, conf, context, collector):
        pass

    def next_tuple(self):
        pass

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class IdleBolt(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.ack(tup)
'''
#: Keys whose defaults decide the steady-state write rate; printed with the figures.
RATE_KEYS = ("supervisor.heartbeat.frequency.secs", "nimbus.monitor.freq.secs",
             "supervisor.monitor.frequency.secs", "topology.stats.freq.secs")


def log(msg: str) -> None:
    print(f"[zk_writes {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


def zxid(zk) -> int:
    """The server's last committed zxid (epoch in the high 32 bits, counter in the low)."""
    from squall.deploy.zookeeper import four_letter_word
    reply = four_letter_word(zk.host, zk.port, "srvr")
    m = re.search(r"^Zxid: (0x[0-9a-fA-F]+)$", reply, re.M)
    if m is None:
        raise RuntimeError(f"no Zxid in ZooKeeper's srvr reply: {reply!r}")
    return int(m.group(1), 16)


class Intake:
    """Counts what Nimbus takes in through SendSupervisorWorkerHeartbeats: calls, worker
    heartbeats, Topology Master summaries, TaskStats entries and their protobuf bytes."""

    def __init__(self, nimbus: Any):
        self.calls = self.heartbeats = self.summaries = self.task_stats = self.bytes = 0
        record = nimbus.record_heartbeats

        def counting(sid, heartbeats, errors=(), restarts=None, topology_stats=()):
            self.calls += 1
            self.heartbeats += len(heartbeats)
            self.summaries += len(topology_stats)
            self.task_stats += sum(len(hb.tasks) for hb in heartbeats) + sum(
                len(w.tasks) for s in topology_stats for w in s.workers)
            self.bytes += sum(m.ByteSize() for m in (*heartbeats, *topology_stats))
            return record(sid, heartbeats, errors, restarts, topology_stats)
        nimbus.record_heartbeats = counting

    def snapshot(self) -> tuple[int, ...]:
        return (self.calls, self.heartbeats, self.summaries, self.task_stats, self.bytes)


def measure(zk, window: float, intake: Intake | None = None) -> dict[str, float]:
    """Write transactions ZooKeeper commits over ``window`` seconds, and Nimbus's heartbeat
    intake over the same window."""
    before = intake.snapshot() if intake else None
    z0, t0 = zxid(zk), time.monotonic()
    time.sleep(window)
    z1, t1 = zxid(zk), time.monotonic()
    if z1 >> 32 != z0 >> 32:
        raise RuntimeError("ZooKeeper's epoch changed during the window (server restarted?)")
    out = {"writes": z1 - z0, "window_s": t1 - t0, "writes_per_s": (z1 - z0) / (t1 - t0)}
    if intake:
        d = [b - a for a, b in zip(before, intake.snapshot())]
        secs = t1 - t0
        out.update(rpc_per_s=d[0] / secs, heartbeats_per_s=d[1] / secs,
                   summaries_per_s=d[2] / secs, task_stats_per_s=d[3] / secs,
                   heartbeat_bytes_per_s=d[4] / secs)
    return out


class Cluster:
    """ZooKeeper, Nimbus (+ gRPC) and supervisors, all stopped by :meth:`stop`."""

    def __init__(self, base: str, supervisors: int, slots: int):
        from squall.deploy.net import free_port, free_ports
        from squall.deploy.zookeeper import LocalZooKeeper
        self.base = base
        self.zk = LocalZooKeeper().start()
        self.conf = dict(self.zk.conf(root="/squall-bench"), **{
            "nimbus.seeds": ["127.0.0.1"], "nimbus.grpc.port": free_port(),
            "storm.local.hostname": "127.0.0.1"})
        self.ports = [free_ports(slots) for _ in range(supervisors)]
        self.nimbus = self.server = None
        self.intake: Intake | None = None
        self.supervisors: list[Any] = []

    def start(self) -> None:
        from squall.nimbus.nimbus import Nimbus
        from squall.nimbus.servicer import serve
        from squall.supervisor.fetch import grpc_fetcher
        from squall.supervisor.supervisor import Supervisor
        self.nimbus = Nimbus(dict(self.conf, **{"storm.local.dir": self._dir("nimbus")})).start()
        if not self.nimbus.wait_for_leadership(30):
            raise RuntimeError("Nimbus did not become leader within 30 s")
        self.intake = Intake(self.nimbus)  # before the servicer binds record_heartbeats
        self.server = serve(self.nimbus, "127.0.0.1", self.nimbus.port)
        for i, ports in enumerate(self.ports):
            conf = dict(self.conf, **{"storm.local.dir": self._dir(f"sup{i}"),
                                      "supervisor.slots.ports": ports})
            self.supervisors.append(Supervisor(conf, fetch_topology=grpc_fetcher(conf)).start())
        wait_for(lambda: len(self.nimbus.cluster_state.supervisors()) == len(self.ports), 30,
                 "the supervisors to register")

    def _dir(self, name: str) -> str:
        return os.path.join(self.base, name)

    def workers_beating(self, tid: str, workers: int) -> bool:
        """Whether Nimbus holds a heartbeat from each of the topology's ``workers`` workers."""
        found = self.nimbus.cluster_state.get_assignment(tid)
        if found is None or len(found[0]["workers"]) != workers:
            return False
        live = self.nimbus.liveness
        with live._lock:
            beating = {(sid, t, port) for sid, t, port in live.heartbeats if t == tid}
        return all((sid, tid, int(hp.rsplit(":", 1)[1])) in beating
                   for hp, sid in found[0]["slots"].items())

    def stop(self) -> None:
        for sup in self.supervisors:
            sup.close("bench over")  # stops its workers by pid
        if self.server is not None:
            self.server.stop(grace=0).wait(5)
        if self.nimbus is not None:
            self.nimbus.close("bench over")
        self.zk.stop()


def idle_topology(package: str, parallelism: int):
    """The idle topology built from the module in ``package`` (importable here for pickling)."""
    if package not in sys.path:
        sys.path.insert(0, package)
    mod = __import__(IDLE_MODULE)
    from squall.client import TopologyBuilder
    b = TopologyBuilder()
    b.set_spout("idle", mod.IdleSpout(), parallelism)
    b.set_bolt("sink", mod.IdleBolt(), parallelism).shuffle_grouping("idle")
    return b.create_topology()


def run_topology(c: Cluster, package_zip: str, package: str, workers: int, settle: float,
                 window: float, master: bool = True) -> dict[str, Any]:
    """Submit the idle topology with ``workers`` workers (with or without its Topology
    Master), measure, kill it."""
    from squall.client.nimbus_client import NimbusClient
    from squall.client.topology_proto import to_proto
    name = f"idle-{workers}-{'tm' if master else 'no-tm'}"
    with NimbusClient(c.conf) as client:
        location = client.upload(package_zip)
        tid = client.submit(name, location, json.dumps({"topology.workers": workers,
                                                        "topology.master.enable": master}),
                            to_proto(idle_topology(package, workers)))
        log(f"{name}: submitted as {tid}; waiting for a heartbeat from each worker")
        t0 = time.monotonic()
        wait_for(lambda: c.workers_beating(tid, workers), 120, f"{workers} workers heartbeating")
        log(f"{name}: all {workers} workers heartbeating after {time.monotonic() - t0:.1f} s; "
            f"settle {settle:.0f} s, measure {window:.0f} s")
        time.sleep(settle)
        out = measure(c.zk, window, c.intake)
        running = sum(len(s.procs) for s in c.supervisors)
        client.kill(name, wait_secs=0)
    wait_for(lambda: not any(s.procs for s in c.supervisors), 60, f"{name}'s workers to stop")
    return dict(out, workers=workers, worker_processes=running, topology_id=tid, master=master)


def main(argv: list[str] | None = None) -> int:
    from squall.client import config as cfg
    from squall.client.submitter import pack_directory
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10 s windows instead of 20 s")
    ap.add_argument("--window", type=float, default=0,
                    help="seconds each measurement lasts (default 20, 10 with --quick)")
    ap.add_argument("--settle", type=float, default=0,
                    help="seconds between all workers heartbeating and the window "
                         "(default 6, 3 with --quick)")
    ap.add_argument("--supervisors", type=int, default=2, help="supervisors to run")
    ap.add_argument("--slots", type=int, default=4, help="slots per supervisor")
    ap.add_argument("--workers", default="2,8", help="comma list of worker counts to measure")
    ap.add_argument("--master", choices=("both", "on", "off"), default="both",
                    help="run each topology with its Topology Master, without, or both")
    ap.add_argument("--json-out", default=os.path.join(HERE, "results", "zk_writes.json"))
    a = ap.parse_args(argv)
    window = a.window or (10.0 if a.quick else 20.0)
    settle = a.settle or (3.0 if a.quick else 6.0)
    counts = [int(w) for w in a.workers.split(",") if w.strip()]
    if max(counts) > a.supervisors * a.slots:
        ap.error(f"{max(counts)} workers need more than {a.supervisors} x {a.slots} slots")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    defaults = cfg.defaults()
    rates = {k: defaults[k] for k in RATE_KEYS}
    R: dict[str, Any] = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "quick": a.quick,
                         "conf": rates, "supervisors": a.supervisors, "slots": a.slots,
                         "settle_s": settle, "runs": []}
    with tempfile.TemporaryDirectory(prefix="squall-zk-bench-") as base:
        package = os.path.join(base, "package")
        os.makedirs(package)
        with open(os.path.join(package, IDLE_MODULE + ".py"), "w") as fh:
            fh.write(IDLE_SOURCE)
        package_zip = pack_directory(package, os.path.join(base, "package.zip"))
        c = Cluster(base, a.supervisors, a.slots)
        try:
            c.start()
            log(f"ZooKeeper pid {c.zk.pid} on {c.zk.connect_string}, Nimbus on "
                f"{c.nimbus.address}, {a.supervisors} supervisors x {a.slots} slots; "
                f"baseline: settle {settle:.0f} s, measure {window:.0f} s")
            time.sleep(settle)
            R["runs"].append(dict(measure(c.zk, window, c.intake), workers=0,
                                  worker_processes=0, master=None))
            masters = {"both": (False, True), "on": (True,), "off": (False,)}[a.master]
            for n in counts:
                for master in masters:
                    R["runs"].append(run_topology(c, package_zip, package, n, settle, window,
                                                  master))
        finally:
            c.stop()
    report(R)
    os.makedirs(os.path.dirname(os.path.abspath(a.json_out)), exist_ok=True)
    with open(a.json_out, "w") as fh:
        json.dump(R, fh, indent=2)
    print(f"\nJSON: {a.json_out}")
    return 0


def report(R: dict[str, Any]) -> None:
    print(f"ZooKeeper writes with idle workers {'(quick) ' if R['quick'] else ''}{R['time']}; "
          f"{R['supervisors']} supervisors x {R['slots']} slots; defaults: "
          + ", ".join(f"{k}={v}" for k, v in R["conf"].items()))
    print()
    print(f"{'workers':>7}  {'master':>6}  {'writes':>6}  {'window':>7}  {'writes/s':>8}  "
          f"{'RPCs/s':>6}  {'worker hbs/s':>12}  {'summaries/s':>11}  {'TaskStats/s':>11}  "
          f"{'bytes/s':>8}")
    for r in R["runs"]:
        master = "-" if r.get("master") is None else ("on" if r["master"] else "off")
        print(f"{r['workers']:>7}  {master:>6}  {r['writes']:>6}  {r['window_s']:>6.1f}s  "
              f"{r['writes_per_s']:>8.3f}  {r.get('rpc_per_s', 0):>6.2f}  "
              f"{r.get('heartbeats_per_s', 0):>12.2f}  {r.get('summaries_per_s', 0):>11.2f}  "
              f"{r.get('task_stats_per_s', 0):>11.2f}  {r.get('heartbeat_bytes_per_s', 0):>8.0f}")
    by = {r["workers"]: r["writes_per_s"] for r in R["runs"] if r.get("master") in (None, True)}
    if 2 in by and 8 in by:
        ratio = by[8] / by[2] if by[2] else (1.0 if by[8] == 0 else float("inf"))
        R["ratio_8_vs_2"] = ratio
        print(f"\n8 vs 2 workers: {ratio:.2f}x" + (" (both zero)" if by[2] == by[8] == 0 else ""))


if __name__ == "__main__":
    sys.exit(main())
