#!/usr/bin/env python3
"""Squall benchmark: word-count throughput, complete latency, acker memory, idle CPU.

Run from the repo root:  .venv/bin/python bench/bench.py [--quick]

Prints a table on stdout (progress on stderr) and writes the same figures as
JSON to bench/results/latest.json. The machine is small and shared, so every
figure comes with a baseline measured in the same run and the ratio to it:

1. raw pipe: msgpack words pushed over ZeroMQ (ipc) between two Python
   processes -- the peers' ``zmq_wordcount.py`` (batched and ``--batch 1``)
   found at ``$SQUALL_PEERS_DIR`` or ``<repo>/../shared/peers``, else an
   equivalent inline baseline;
2. Squall word count (2 workers, bench/topologies.py) with acking on and off:
   steady-state words/s between 10 % and 90 % of completion (acked sentence
   trees x 10, or words executed by the count tasks), from heartbeat counters
   interpolated per worker, plus the overall rate from the first ack/word to
   the last; ratios against the raw pipe of figure 1 and against a short
   batched raw-pipe run just before and after each Squall run (the machine's
   speed drifts by tens of percent within minutes);
3. complete latency p50/p99 at half the measured acked maximum (a token-bucket
   spout). Warm-up is excluded by having the spout time its own trees (emit
   call -> ``ack`` callback, the same span the runtime's ``complete_latency_ms``
   covers) only for sentences emitted in the window after the warm-up; the
   runtime's heartbeat reservoirs are reported alongside for comparison (they
   sample the whole run, warm-up included). Baseline: a msgpack ping-pong
   round trip over ZeroMQ ipc between two processes;
4. acker memory per pending tree (AckerLedger, 1M trees with random 64-bit
   roots and values) and the spout's pending map cost per entry
   ``root -> (msg_id, monotonic time)`` with int message ids (PendingMap, what
   the spout runs, and the RotatingMap of tuples it replaced), each from RSS and
   from tracemalloc in a fresh interpreter; baseline: a bare dict of 64-bit
   int -> 64-bit int;
5. idle CPU per worker with a spout that emits nothing (default stats
   interval); baseline: the same workers' CPU under full load (figure 2).

Diagnostics (off by default): ``--switch-interval S`` sets the workers' GIL
switch interval; ``--latency-trace FILE`` dumps (emit time, latency) pairs.

No assertions: the targets are printed for context only.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import multiprocessing as mp
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

try:
    from squall.bench import topologies as topo
    CODE_PATHS: list[str] = []
except ImportError:  # squall installed without bench/ (not editable): import it by path
    sys.path.insert(0, HERE)
    import topologies as topo  # type: ignore[no-redef]
    CODE_PATHS = [HERE]

TARGETS = {
    "acked_words_per_s": {"floor": 300_000, "goal": 1_000_000},
    "unacked_words_per_s": {"floor": 600_000, "goal": 1_600_000},
    "p99_complete_latency_ms": {"max": 10.0},
    "acker_bytes_per_tree": {"max": 100.0},
    "spout_pending_bytes_per_entry": {"max": 100.0},
    "idle_cpu_pct_per_worker": {"max": 2.0},
}
#: The peers' README: pipe limit measured on the reference machine (batched, words/s).
REFERENCE_PIPE_WORDS_PER_S = 6_500_000

WORDS_PER_SENTENCE = 10


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pct(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    return sorted_vals[min(len(sorted_vals) - 1, int(len(sorted_vals) * q))]


# ---------------------------------------------------------------------------------------
# 1. raw pipe baseline
# ---------------------------------------------------------------------------------------

#: --no-peers: always use the inline raw-pipe baseline.
FORCE_INLINE = False


def peers_dir() -> str | None:
    if FORCE_INLINE:
        return None
    for d in (os.environ.get("SQUALL_PEERS_DIR"), os.path.join(REPO, "..", "shared", "peers")):
        if d and os.path.isfile(os.path.join(d, "zmq_wordcount.py")):
            return os.path.abspath(d)
    return None


def run_peer(pdir: str, n: int, batch: int) -> dict:
    cmd = [sys.executable, os.path.join(pdir, "zmq_wordcount.py"), "-n", str(n),
           "--batch", str(batch)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    m = re.search(r"words/s=([0-9.]+)", p.stdout)
    if p.returncode != 0 or not m:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {p.returncode}):\n{p.stdout}\n{p.stderr}")
    ok = "correct=true" in p.stdout
    return {"words_per_s": float(m.group(1)), "correct": ok, "sentences": n, "batch": batch,
            "source": "peers/zmq_wordcount.py", "line": p.stdout.strip().splitlines()[-1]}


def _inline_producer(endpoint: str, n: int, batch: int) -> None:
    import msgpack
    import zmq
    pool = topo.make_pool()
    ctx = zmq.Context()
    s = ctx.socket(zmq.PUSH)
    s.setsockopt(zmq.SNDHWM, 100_000 if batch == 1 else 1000)
    s.connect(endpoint)
    packb, send = msgpack.packb, s.send
    k = len(pool)
    if batch == 1:
        for i in range(n):
            for w in pool[i % k].split(" "):
                send(packb(w))
    else:
        buf: list = []
        for i in range(n):
            buf.extend(pool[i % k].split(" "))
            if len(buf) >= batch:
                send(packb(buf))
                buf = []
        if buf:
            send(packb(buf))
    send(b"END")
    s.close(linger=-1)
    ctx.term()


def run_inline_pipe(n: int, batch: int) -> dict:
    """The peers' zmq_wordcount, inline: PUSH/PULL over ipc, msgpack, words counted in a dict."""
    import msgpack
    import zmq
    d = tempfile.mkdtemp(prefix="sqbench-pipe-")
    ep = f"ipc://{d}/sock"
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.RCVHWM, 100_000 if batch == 1 else 1000)
    pull.bind(ep)
    child = mp.get_context("fork").Process(target=_inline_producer, args=(ep, n, batch))
    try:
        t0 = time.perf_counter()
        child.start()
        counts: dict = {}
        get, recv, unpackb = counts.get, pull.recv, msgpack.unpackb
        while True:
            msg = recv()
            if msg == b"END":
                break
            if batch == 1:
                w = unpackb(msg)
                counts[w] = get(w, 0) + 1
            else:
                for w in unpackb(msg):
                    counts[w] = get(w, 0) + 1
        wall = time.perf_counter() - t0
        child.join()
    finally:
        if child.is_alive():
            child.terminate()
            child.join(5)
        pull.close(linger=0)
        ctx.term()
        shutil.rmtree(d, ignore_errors=True)
    total = sum(counts.values())
    return {"words_per_s": total / wall, "correct": total == n * WORDS_PER_SENTENCE,
            "sentences": n, "batch": batch, "source": "inline (bench.py)"}


def _pipe(pdir: str | None, n: int, batch: int) -> dict:
    if pdir:
        try:
            return run_peer(pdir, n, batch)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            log(f"  the peer failed ({exc}); using the inline baseline")
    return run_inline_pipe(n, batch)


def fig_pipe(quick: bool) -> dict:
    pdir = peers_dir()
    n_batched = 200_000 if quick else 2_000_000
    n_single = 50_000 if quick else 500_000
    out: dict[str, Any] = {"peers_dir": pdir}
    for key, n, batch in (("batched", n_batched, 1000), ("unbatched", n_single, 1)):
        log(f"raw pipe baseline ({key}, batch {batch}, {n} sentences) "
            f"{'via ' + pdir if pdir else 'inline'}")
        out[key] = _pipe(pdir, n, batch)
        log(f"  {out[key]['words_per_s']:,.0f} words/s (correct={out[key]['correct']})")
    return out


# ---------------------------------------------------------------------------------------
# cluster helpers
# ---------------------------------------------------------------------------------------

#: Extra topology conf for every cluster (bench-only diagnostics such as bench.switch_interval).
EXTRA_CONF: dict[str, Any] = {}


def cluster(name: str, conf: dict, parallelism: int, ipc: bool = True,
            builder: Callable[[int], Any] | None = None):
    """``builder(parallelism)``: the TopologyBuilder to run (default: topo.word_count)."""
    from squall.deploy.static import StaticCluster
    conf = {**conf, **EXTRA_CONF}
    return StaticCluster(name, (builder or topo.word_count)(parallelism).create_topology(), conf,
                        code_paths=CODE_PATHS, stdout=subprocess.DEVNULL, ipc=ipc)


class CounterSeries:
    """Per-worker time series of a heartbeat counter; interpolates the cluster-wide total.

    Each worker's counter is sampled at its heartbeat's own ``time`` and starts
    at 0 at the worker's start (``time - uptime_secs``), so the total at any
    instant is the sum of per-worker linear interpolations -- this removes the
    skew between the workers' heartbeat clocks and the polling loop.
    """

    def __init__(self, fn: Callable[[dict], float]):
        self.fn = fn
        self.data: dict[str, list[tuple[float, float]]] = {}

    def add(self, hbs: dict[str, dict]) -> float:
        for wid, hb in hbs.items():
            t = float(hb.get("time", 0))
            s = self.data.get(wid)
            if s is None:
                s = self.data[wid] = [(t - float(hb.get("uptime_secs", 0)), 0.0)]
            if t > s[-1][0]:
                s.append((t, float(self.fn(hb))))
        return self.latest()

    def latest(self) -> float:
        return sum(s[-1][1] for s in self.data.values())

    @staticmethod
    def _at(s: list[tuple[float, float]], t: float) -> float:
        if t <= s[0][0]:
            return s[0][1]
        for (t0, v0), (t1, v1) in zip(s, s[1:]):
            if t <= t1:
                return v0 + (v1 - v0) * (t - t0) / (t1 - t0)
        return s[-1][1]

    def crossing(self, x: float) -> float | None:
        """First time the interpolated total reaches ``x``."""
        times = sorted({t for s in self.data.values() for t, _ in s})
        prev_t, prev_v = None, 0.0
        for t in times:
            v = sum(self._at(s, t) for s in self.data.values())
            if v >= x:
                if prev_t is None or v == prev_v:
                    return t
                return prev_t + (t - prev_t) * (x - prev_v) / (v - prev_v)
            prev_t, prev_v = t, v
        return None


def _sched_secs(pids: list[int]) -> dict[int, float]:
    """CPU seconds per process from /proc/<pid>/task/*/schedstat (ns resolution, Linux)."""
    out = {}
    for pid in pids:
        total = 0
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                        total += int(fh.read().split()[0])
                except (OSError, ValueError, IndexError):
                    pass
            out[pid] = total / 1e9
        except OSError:
            out[pid] = float("nan")
    return out


class ThrottleSampler:
    """Fraction of fresh heartbeats that report the worker's spouts throttled by backpressure."""

    def __init__(self) -> None:
        self.seen: dict[str, float] = {}
        self.n = self.throttled = 0

    def add(self, hbs: dict[str, dict]) -> None:
        for wid, hb in hbs.items():
            if self.seen.get(wid) != hb.get("time"):
                self.seen[wid] = hb.get("time", 0)
                self.n += 1
                self.throttled += bool(hb.get("throttled"))

    def fraction(self) -> float | None:
        return self.throttled / self.n if self.n else None


def _rss_mb(hbs: dict[str, dict]) -> list[float]:
    """Each worker's RSS in MB, in worker-id order."""
    return [round(hb.get("rss_bytes", 0) / 2**20, 1) for _, hb in sorted(hbs.items())]


def _component_sum(component: str, key: str) -> Callable[[dict], float]:
    def fn(hb: dict) -> float:
        return sum(s.get(key, 0) for s in hb.get("tasks", {}).values()
                   if s.get("component") == component)
    return fn


def user_metrics(hbs: dict[str, dict]) -> dict[str, dict[str, float]]:
    """Tasks' user metrics summed per component: counters, meters and gauges by value,
    histograms by their number of updates (``<name>.n``) and sum (``<name>.sum``)."""
    out: dict[str, dict[str, float]] = {}
    for hb in hbs.values():
        for s in hb.get("tasks", {}).values():
            comp = out.setdefault(s.get("component", "?"), {})
            for name, m in (s.get("metrics") or {}).items():
                if m.get("type") == "histogram":
                    h = m.get("hist", {})
                    comp[f"{name}.n"] = comp.get(f"{name}.n", 0) + h.get("n", 0)
                    comp[f"{name}.sum"] = comp.get(f"{name}.sum", 0) + h.get("sum", 0)
                else:
                    comp[name] = comp.get(name, 0) + m.get("value", 0)
    return {c: m for c, m in out.items() if m}


def _cpu_secs(pids: list[int]) -> dict[int, float]:
    import psutil
    out = {}
    for pid in pids:
        try:
            ct = psutil.Process(pid).cpu_times()
            out[pid] = ct.user + ct.system
        except psutil.Error:
            out[pid] = float("nan")
    return out


def collect_spout_files(lc: Any, out_dir: str, n_spouts: int, timeout: float = 15.0) -> list[dict]:
    """Deactivate the topology; each bench spout then writes ``out_dir/lat-<task>.json``."""
    lc.set_status("INACTIVE")
    deadline = time.monotonic() + timeout
    while len([f for f in os.listdir(out_dir) if f.endswith(".json")]) < n_spouts:
        if time.monotonic() > deadline:
            raise TimeoutError("the spouts did not write their files after deactivation")
        time.sleep(0.1)
    out = []
    for f in sorted(os.listdir(out_dir)):
        if f.endswith(".json"):
            with open(os.path.join(out_dir, f)) as fh:
                out.append(json.load(fh))
    return out


def gc_summary(files: list[dict]) -> dict[str, dict]:
    """GC pauses the spouts' gc callbacks saw, per generation, summed over workers."""
    out: dict[str, dict] = {}
    for d in files:
        for gen, ms in d.get("gc_pauses", []):
            g = out.setdefault(f"gen{gen}", {"count": 0, "total_ms": 0.0, "max_ms": 0.0})
            g["count"] += 1
            g["total_ms"] += ms
            g["max_ms"] = max(g["max_ms"], ms)
    return out


def _gc_line(gcs: dict[str, dict]) -> str:
    if not gcs:
        return "no collections"
    return "; ".join(f"{g}: {v['count']}x, total {v['total_ms']:.0f} ms, max {v['max_ms']:.1f} ms"
                     for g, v in sorted(gcs.items()))


# ---------------------------------------------------------------------------------------
# 2. throughput
# ---------------------------------------------------------------------------------------

def run_throughput(acking: bool, n: int, parallelism: int, max_pending: int,
                   extra: dict | None = None, ipc: bool = True,
                   builder: Callable[[int], Any] | None = None) -> dict:
    conf: dict[str, Any] = {
        "topology.workers": 2, "topology.stats.freq.secs": 0.25,
        "topology.max.spout.pending": max_pending,
        "bench.mode": "fixed", "bench.sentences": n, "bench.reliable": acking,
        **(extra or {}),
    }
    out_dir = tempfile.mkdtemp(prefix="sqbench-tp-")
    conf["bench.out_dir"] = out_dir
    if not acking:
        conf["topology.acker.executors"] = 0
    # acking on: all N sentence trees acked; off: all N*10 words executed by count tasks.
    if acking:
        series = CounterSeries(_component_sum(topo.SPOUT, "acked"))
        target = float(n)
    else:
        series = CounterSeries(_component_sum(topo.COUNT, "executed"))
        target = float(n * WORDS_PER_SENTENCE)
    label = "acked" if acking else "unacked"
    lc = cluster(f"bench-{label}", conf, parallelism, ipc=ipc, builder=builder)
    res: dict[str, Any] = {"sentences": n, "acking": acking, "parallelism": parallelism,
                           "max_spout_pending": max_pending if acking else None}
    try:
        lc.start()
        pids = [w.proc.pid for w in lc.workers]
        log(f"throughput ({label}): {n} sentences, 2 workers (pids {pids})")
        deadline = time.monotonic() + max(120.0, n / 2000.0)
        cpu_lo = cpu_hi = None
        next_progress = time.monotonic() + 5
        bp = ThrottleSampler()
        #: Workers' RSS (MB) when the run first reached each fraction of its target.
        rss_at: dict[str, list[float]] = {}
        while True:
            hbs = lc.heartbeats()
            v = series.add(hbs)
            for frac in (0.1, 0.5, 0.9):
                key = f"{frac:.0%}"
                if key not in rss_at and v >= frac * target:
                    rss_at[key] = _rss_mb(hbs)
            if 0.1 * target <= v < 0.9 * target:
                bp.add(hbs)
            now_wall = time.time()
            if cpu_lo is None and v >= 0.1 * target:
                cpu_lo = (now_wall, _cpu_secs(pids))
            if cpu_hi is None and v >= 0.9 * target:
                cpu_hi = (now_wall, _cpu_secs(pids))
            if v >= target:
                break
            if lc.crashed():
                raise RuntimeError("\n".join(lc.describe_exit(w) for w in lc.crashed()))
            if time.monotonic() > deadline:
                raise TimeoutError(f"throughput ({label}): only {v:.0f} of {target:.0f} after "
                                   "the deadline")
            if time.monotonic() >= next_progress:
                log(f"  {v / target:5.1%} done")
                next_progress = time.monotonic() + 5
            time.sleep(0.05)
        time.sleep(2 * 0.25 + 0.1)  # every worker's next heartbeat: consistent final counters
        hbs = lc.heartbeats()
        scale = WORDS_PER_SENTENCE if acking else 1
        res["throttled_fraction_steady"] = bp.fraction()
        t_first = series.crossing(1)
        t_done = series.crossing(target)
        t10 = series.crossing(0.1 * target)
        t90 = series.crossing(0.9 * target)
        res["steady_words_per_s"] = 0.8 * target * scale / (t90 - t10)
        res["overall_words_per_s"] = target * scale / (t_done - t_first)
        res["wall_s"] = t_done - t_first
        res["steady_window_s"] = t90 - t10
        if cpu_lo and cpu_hi and cpu_hi[0] > cpu_lo[0]:
            res["cpu_pct_per_worker_loaded"] = [
                100.0 * (cpu_hi[1][p] - cpu_lo[1][p]) / (cpu_hi[0] - cpu_lo[0]) for p in pids]
        spouts = [s for hb in hbs.values() for s in hb["tasks"].values()
                  if s["component"] == topo.SPOUT]
        counts = [s for hb in hbs.values() for s in hb["tasks"].values()
                  if s["component"] == topo.COUNT]
        res["spout_emitted"] = sum(s["emitted"] for s in spouts)
        res["spout_failed"] = sum(s["failed"] for s in spouts)
        res["spout_timed_out"] = sum(s["timed_out"] for s in spouts)
        res["words_counted"] = sum(s["executed"] for s in counts)
        res["complete_latency_ms_at_max"] = [s.get("complete_latency_ms") for s in spouts]
        res["queue_max"] = {ex: st["queue_max"] for hb in hbs.values()
                            for ex, st in hb["executors"].items()}
        res["rss_mb"] = rss_at["100%"] = _rss_mb(hbs)
        res["rss_mb_at"] = rss_at
        res["dropped"] = sum(hb.get("dropped_batches", 0) + hb.get("dropped_tuples", 0)
                             for hb in hbs.values())
        user = user_metrics(hbs)
        if user:
            res["user_metrics"] = user
        log(f"  steady {res['steady_words_per_s']:,.0f} words/s, overall "
            f"{res['overall_words_per_s']:,.0f} words/s over {res['wall_s']:.1f}s"
            + (f", worker CPU {', '.join(f'{c:.0f}%' for c in res.get('cpu_pct_per_worker_loaded', []))}"))
        try:
            # Another topology's spouts may not be the bench's, which write these figures.
            files = collect_spout_files(lc, out_dir, len(spouts),
                                        timeout=10 if builder is None else 2)
            res["gc_pauses_all_workers"] = gc_summary(files)
            secs = sum(d.get("since_first_emit_s") or 0 for d in files)
            if secs:
                total = sum(g["total_ms"] for g in res["gc_pauses_all_workers"].values())
                res["gc_fraction_of_worker_wall"] = total / 1000.0 / secs
            log(f"  GC: {_gc_line(res['gc_pauses_all_workers'])}")
        except TimeoutError as exc:
            log(f"  (no GC figures: {exc})")
    finally:
        r = lc.stop(drain_secs=0)
        if r.crashed:
            log(f"  worker(s) exited badly: {r.crashed}")
        lc.cleanup()
        shutil.rmtree(out_dir, ignore_errors=True)
    return res


def pipe_batched(n: int) -> float:
    return _pipe(peers_dir(), n, 1000)["words_per_s"]


def fig_throughput(quick: bool, args: argparse.Namespace) -> dict:
    """Each run is bracketed by a short batched raw-pipe run: its adjacent baseline."""
    n = args.sentences or (50_000 if quick else 200_000)
    n_cal = 200_000 if quick else 500_000
    out = {}
    before = pipe_batched(n_cal)
    for key, acking in (("acked", True), ("unacked", False)):
        r = run_throughput(acking, n, args.parallelism, args.max_pending)
        after = pipe_batched(n_cal)
        r["adjacent_pipe_words_per_s"] = (before + after) / 2
        r["adjacent_pipe_runs"] = [before, after]
        log(f"  adjacent raw pipe (batched): {before:,.0f} before, {after:,.0f} after")
        before = after
        out[key] = r
    return out


# ---------------------------------------------------------------------------------------
# 3. latency
# ---------------------------------------------------------------------------------------

def _pong(endpoint: str) -> None:
    import zmq
    ctx = zmq.Context()
    s = ctx.socket(zmq.REP)
    s.connect(endpoint)
    while True:
        m = s.recv()
        s.send(m)
        if m == b"END":
            break
    s.close(linger=-1)
    ctx.term()


def zmq_rtt(n: int) -> dict:
    """Baseline: msgpack ping-pong over ZeroMQ ipc between two processes (REQ/REP)."""
    import msgpack
    import zmq
    d = tempfile.mkdtemp(prefix="sqbench-rtt-")
    ep = f"ipc://{d}/sock"
    ctx = zmq.Context()
    s = ctx.socket(zmq.REQ)
    s.bind(ep)
    child = mp.get_context("fork").Process(target=_pong, args=(ep,))
    child.start()
    rtts = []
    try:
        payload = msgpack.packb(["the quick brown fox jumps over the lazy dog again", 1])
        for i in range(n + 500):
            t0 = time.perf_counter()
            s.send(payload)
            msgpack.unpackb(s.recv())
            if i >= 500:  # warm-up
                rtts.append((time.perf_counter() - t0) * 1000.0)
        s.send(b"END")
        s.recv()
        child.join(5)
    finally:
        if child.is_alive():
            child.terminate()
            child.join(5)
        s.close(linger=0)
        ctx.term()
        shutil.rmtree(d, ignore_errors=True)
    rtts.sort()
    return {"p50_ms": pct(rtts, 0.5), "p99_ms": pct(rtts, 0.99), "n": len(rtts)}


def fig_latency(quick: bool, args: argparse.Namespace, acked_max_words: float | None) -> dict:
    if args.latency_rate:
        rate = float(args.latency_rate)
        why = "--latency-rate"
    elif acked_max_words:
        rate = 0.5 * acked_max_words / WORDS_PER_SENTENCE
        why = "half the measured acked maximum"
    else:
        rate = 5_000.0
        why = "default (throughput not measured)"
    log("latency baseline: ZeroMQ ipc ping-pong")
    rtt = zmq_rtt(5_000 if quick else 20_000)
    log(f"  rtt p50 {rtt['p50_ms']:.3f} ms, p99 {rtt['p99_ms']:.3f} ms")
    res = latency_at(rate, args.parallelism, args.max_pending, quick,
                     trace_file=args.latency_trace)
    res.update({"rate_basis": why, "baseline_zmq_rtt": rtt})
    return res


def _spout_hist(hbs: dict[str, dict]) -> dict[int, int]:
    """The spouts' complete-latency histograms (cumulative), merged across workers."""
    from squall.client import histogram
    return histogram.merge(
        histogram.parse(s.get("complete_hist"))[0]
        for hb in hbs.values() for s in hb["tasks"].values() if s["component"] == topo.SPOUT)


def latency_at(rate: float, parallelism: int, max_pending: int, quick: bool,
               trace_file: str = "") -> dict:
    """Complete latency at ``rate`` sentences/s (a token-bucket spout), spout-measured.

    The runtime's own figure over the same window is reported beside it: the difference
    of the spouts' complete-latency histograms between the window's first and last
    heartbeats (every acked tree, the same span the spout times).
    """
    from squall.client import histogram
    warmup, measure = (1.0, 4.0) if quick else (3.0, 10.0)
    out_dir = tempfile.mkdtemp(prefix="sqbench-lat-")
    conf = {"topology.workers": 2, "topology.stats.freq.secs": 0.25,
            "topology.max.spout.pending": max_pending,
            "bench.mode": "rate", "bench.rate": rate, "bench.warmup_secs": warmup,
            "bench.measure_secs": measure, "bench.out_dir": out_dir}
    lc = cluster("bench-latency", conf, parallelism)
    res: dict[str, Any] = {"rate_sentences_per_s": rate, "rate_words_per_s": rate * 10,
                           "warmup_s": warmup, "measure_s": measure}
    try:
        lc.start()
        log(f"latency: {rate:,.0f} sentences/s ({rate * 10:,.0f} words/s), {warmup:.0f}s warm-up "
            f"+ {measure:.0f}s measured")
        series = CounterSeries(_component_sum(topo.SPOUT, "emitted"))
        deadline = time.monotonic() + 60
        while series.add(lc.heartbeats()) == 0:  # wait for the first emit
            if lc.crashed():
                raise RuntimeError("\n".join(lc.describe_exit(w) for w in lc.crashed()))
            if time.monotonic() > deadline:
                raise TimeoutError("latency: the spouts never emitted")
            time.sleep(0.05)
        t_first = time.monotonic()
        end = t_first + warmup + measure + 1.0  # + slack for the last acks
        bp = ThrottleSampler()
        hist_start: dict[int, int] | None = None
        while time.monotonic() < end:
            if lc.crashed():
                raise RuntimeError("\n".join(lc.describe_exit(w) for w in lc.crashed()))
            if warmup <= time.monotonic() - t_first < warmup + measure:
                hbs = lc.heartbeats()
                bp.add(hbs)
                if hist_start is None:
                    hist_start = _spout_hist(hbs)
            time.sleep(0.05)
        res["throttled_fraction_in_window"] = bp.fraction()
        hbs = lc.heartbeats()
        window = histogram.subtract(_spout_hist(hbs), hist_start or {})
        res["runtime_window"] = {"p50_ms": histogram.quantile(window, 0.5),
                                 "p99_ms": histogram.quantile(window, 0.99),
                                 "p999_ms": histogram.quantile(window, 0.999),
                                 "n": sum(window.values())}
        spouts = [s for hb in hbs.values() for s in hb["tasks"].values()
                  if s["component"] == topo.SPOUT]
        res["heartbeat_reservoir"] = [s.get("complete_latency_ms") for s in spouts]
        res["spout_failed"] = sum(s["failed"] for s in spouts)
        # the spouts write their window's latencies on deactivate
        files = collect_spout_files(lc, out_dir, len(spouts) or parallelism)
        lats: list[float] = []
        censored: list[float] = []
        for d in files:
            lats.extend(d["latencies_ms"])
            censored.extend(d.get("unacked_age_ms", []))
        emitted = sum(d["window_emitted"] for d in files)
        if trace_file:
            with open(trace_file, "w") as fh:
                json.dump({d["task"]: d.get("trace") for d in files}, fh)
        # Trees of the window still pending at the end count with their age so far (a lower
        # bound): an overloaded run shows up in the percentiles instead of being dropped.
        lats.extend(censored)
        lats.sort()
        res.update({"p50_ms": pct(lats, 0.5), "p99_ms": pct(lats, 0.99),
                    "p999_ms": pct(lats, 0.999), "max_ms": lats[-1] if lats else float("nan"),
                    "mean_ms": sum(lats) / len(lats) if lats else float("nan"),
                    "n": len(lats), "achieved_sentences_per_s": emitted / measure,
                    "unacked_in_window": len(censored),
                    "gc_pauses_in_window_all_workers": gc_summary(files)})
        rw = res["runtime_window"]
        log(f"  spout: p50 {res['p50_ms']:.2f} p99 {res['p99_ms']:.2f} p99.9 "
            f"{res['p999_ms']:.2f} ms over {len(lats)} trees (achieved "
            f"{res['achieved_sentences_per_s']:,.0f} sentences/s, {len(censored)} unacked); "
            f"runtime: p50 {rw['p50_ms']:.2f} p99 {rw['p99_ms']:.2f} p99.9 "
            f"{rw['p999_ms']:.2f} ms over {rw['n']}")
    finally:
        lc.stop(drain_secs=0)
        lc.cleanup()
        shutil.rmtree(out_dir, ignore_errors=True)
    return res


# ---------------------------------------------------------------------------------------
# 4. memory (each measurement in a fresh interpreter: clean heap, no tracemalloc in RSS runs)
# ---------------------------------------------------------------------------------------

def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_child(kind: str, method: str, n: int) -> dict:
    import tracemalloc
    from squall.acker import AckerLedger, PendingMap, RotatingMap
    rb = random.getrandbits
    mono = time.monotonic
    holder: list[Any] = []
    gc.collect()
    if method == "tracemalloc":
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
    else:
        before = _rss()
    if kind == "ledger":  # as the acker receives them: fresh 64-bit root and value ints
        ledger = AckerLedger()
        init = ledger.init
        for i in range(n):
            init(rb(64), rb(64) | 1, i & 7)
        assert len(ledger) == n
        holder.append(ledger)
    elif kind == "pending":  # the spout's pending map: root -> (msg_id, emit time)
        pm = PendingMap(3)
        add = pm.add
        for i in range(n):
            add(rb(64) | 2, i, mono())
        holder.append(pm)
    elif kind == "rotmap":  # what the spout used before PendingMap
        m: Any = RotatingMap(3)
        put = m.put
        for i in range(n):
            put(rb(64), (i, mono()))
        holder.append(m)
    elif kind == "dict":  # baseline: the least a Python dict of int -> int can cost
        d: dict = {}
        for i in range(n):
            d[rb(64)] = rb(64)
        holder.append(d)
    else:
        raise ValueError(kind)
    gc.collect()
    if method == "tracemalloc":
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
    else:
        after = _rss()
    return {"kind": kind, "method": method, "n": n, "bytes_per_entry": (after - before) / n}


def worker_rss_pending(n: int) -> dict:
    """One worker (spout, a bolt that never acks, the acker) holding ``n`` pending trees:
    its RSS growth per tree from 10% of ``n`` to ``n`` (the spout's PendingMap, the acker's
    ledger, and whatever else a pending tree keeps alive)."""
    conf = {"topology.workers": 1, "topology.stats.freq.secs": 0.25,
            "topology.max.spout.pending": n + 1, "topology.message.timeout.secs": 3600,
            "bench.mode": "fixed", "bench.sentences": n, "bench.reliable": True}
    lc = cluster("bench-pending", conf, 1, builder=topo.pending_trees)
    res: dict[str, Any] = {"trees": n}
    try:
        lc.start()
        deadline = time.monotonic() + max(120.0, n / 5000.0)
        marks: dict[str, tuple[int, float]] = {}
        spout_pending = _component_sum(topo.SPOUT, "pending")
        while True:
            hbs = lc.heartbeats()
            pending = sum(spout_pending(hb) for hb in hbs.values())
            rss = sum(hb.get("rss_bytes", 0) for hb in hbs.values())
            if "start" not in marks and pending >= 0.1 * n:
                marks["start"] = (pending, rss)
            if pending >= n:
                time.sleep(0.6)  # the next heartbeat: RSS after the last tree
                rss = sum(hb.get("rss_bytes", 0) for hb in lc.heartbeats().values())
                marks["end"] = (pending, rss)
                break
            if lc.crashed():
                raise RuntimeError("\n".join(lc.describe_exit(w) for w in lc.crashed()))
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {pending} of {n} trees pending after the deadline")
            time.sleep(0.1)
        (p0, r0), (p1, r1) = marks["start"], marks["end"]
        res.update(rss_mb_at_end=r1 / 2**20, rss_mb_at_10pct=r0 / 2**20,
                   bytes_per_tree=(r1 - r0) / max(1, p1 - p0))
        log(f"  worker RSS {r1 / 2**20:,.0f} MB at {p1:,} pending trees; "
            f"{res['bytes_per_tree']:.0f} B per tree from 10% to 100%")
    finally:
        lc.stop(drain_secs=0)
        lc.cleanup()
    return res


def fig_memory(quick: bool) -> dict:
    n = 200_000 if quick else 1_000_000
    out: dict[str, Any] = {"entries": n}
    for kind in ("ledger", "pending", "rotmap", "dict"):
        for method in ("rss", "tracemalloc"):
            log(f"memory: {kind} x {n:,} via {method}")
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--memory-child",
                                kind, method, str(n)], capture_output=True, text=True,
                               timeout=600)
            if p.returncode != 0:
                raise RuntimeError(f"memory child failed: {p.stderr}")
            r = json.loads(p.stdout.strip().splitlines()[-1])
            out.setdefault(kind, {})[method] = r["bytes_per_entry"]
            log(f"  {r['bytes_per_entry']:.1f} B/entry")
    log(f"memory: a worker holding {n:,} pending trees")
    out["worker_pending"] = worker_rss_pending(n)
    return out


# ---------------------------------------------------------------------------------------
# 5. idle CPU
# ---------------------------------------------------------------------------------------

def fig_idle(quick: bool, args: argparse.Namespace) -> dict:
    settle, window = (2.0, 3.0) if quick else (3.0, 5.0)
    conf = {"topology.workers": 2, "bench.mode": "idle"}  # default stats freq (1 s), acking on
    lc = cluster("bench-idle", conf, args.parallelism)
    try:
        lc.start()
        pids = [w.proc.pid for w in lc.workers]
        log(f"idle CPU: workers {pids}, settle {settle:.0f}s, measure {window:.0f}s")
        lc.wait_for(lambda: len(lc.heartbeats()) == len(lc.workers), 30, what="heartbeats")
        time.sleep(settle)
        c0, s0, t0 = _cpu_secs(pids), _sched_secs(pids), time.monotonic()
        time.sleep(window)
        c1, s1, t1 = _cpu_secs(pids), _sched_secs(pids), time.monotonic()
        if lc.crashed():
            raise RuntimeError("\n".join(lc.describe_exit(w) for w in lc.crashed()))
        per = [100.0 * (c1[p] - c0[p]) / (t1 - t0) for p in pids]
        # psutil's cpu_times tick in 10 ms (0.2 % of a core over 5 s); schedstat is exact.
        per_sched = [100.0 * (s1[p] - s0[p]) / (t1 - t0) for p in pids]
        import psutil
        threads = [psutil.Process(p).num_threads() for p in pids]
        log(f"  {', '.join(f'{c:.2f}%' for c in per)} of a core (psutil); "
            f"{', '.join(f'{c:.2f}%' for c in per_sched)} (schedstat)")
    finally:
        lc.stop(drain_secs=0)
        lc.cleanup()
    return {"cpu_pct_per_worker": per, "cpu_pct_per_worker_schedstat": per_sched,
            "threads_per_worker": threads, "settle_s": settle,
            "window_s": window, "stats_freq_secs": 1.0}


# ---------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------

def _fmt(v: Any, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, str):
        return v
    if unit == "w/s":
        return f"{v / 1e6:.3f}M" if v >= 1e6 else f"{v / 1e3:.1f}k"
    if unit == "ms":
        return f"{v:.2f} ms"
    if unit == "B":
        return f"{v:.1f} B"
    if unit == "%":
        return f"{v:.2f}%"
    return f"{v:.3g}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def _ratio(a: Any, b: Any) -> float | None:
    try:
        if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b):
            return None
        return a / b
    except TypeError:
        return None


def build_rows(R: dict) -> list[dict]:
    rows: list[dict] = []

    def row(figure: str, value: Any, unit: str, base_name: str, base: Any, target: str,
            meets: bool | None) -> None:
        rows.append({"figure": figure, "value": value, "unit": unit, "baseline": base_name,
                     "baseline_value": base, "ratio": _ratio(value, base), "target": target,
                     "meets": meets})

    pipe = R.get("pipe") or {}
    pb = (pipe.get("batched") or {}).get("words_per_s")
    pu = (pipe.get("unbatched") or {}).get("words_per_s")
    if pipe:
        src = "peers" if pipe.get("peers_dir") else "inline"
        row(f"1. raw pipe ({src}), batched (1000 words/msg)", pb, "w/s", "itself", pb,
            f"ref. {REFERENCE_PIPE_WORDS_PER_S / 1e6:.1f}M on the peers' machine", None)
        row(f"1. raw pipe ({src}), 1 word/msg", pu, "w/s", "raw batched", pb, "ref. 0.63M", None)
    tp = R.get("throughput") or {}
    for key, label, tkey in (("acked", "acking on", "acked_words_per_s"),
                             ("unacked", "acking off", "unacked_words_per_s")):
        r = tp.get(key)
        if not r:
            continue
        t = TARGETS[tkey]
        v = r.get("steady_words_per_s")
        row(f"2. word count {label} (steady)", v, "w/s", "raw batched", pb,
            f"floor {t['floor'] / 1e3:.0f}k, goal {t['goal'] / 1e6:.1f}M",
            v >= t["floor"] if v else None)
        row(f"2. word count {label} (steady)", v, "w/s", "raw 1 word/msg", pu, "", None)
        row(f"2. word count {label} (steady)", v, "w/s", "adjacent raw batched",
            r.get("adjacent_pipe_words_per_s"), "", None)
        row(f"2. word count {label} (overall wall)", r.get("overall_words_per_s"), "w/s",
            "raw batched", pb, "", None)
    lat = R.get("latency")
    if lat:
        rtt = lat["baseline_zmq_rtt"]
        rate = f" @ {lat['rate_words_per_s'] / 1e3:.0f}k w/s"
        achieved = lat.get("achieved_sentences_per_s")
        if achieved and achieved < 0.97 * lat["rate_sentences_per_s"]:
            rate += f" (only {achieved * 10 / 1e3:.0f}k sustained)"
        row(f"3. complete latency p50{rate}", lat.get("p50_ms"), "ms", "zmq ipc RTT p50",
            rtt["p50_ms"], "", None)
        row(f"3. complete latency p99{rate}", lat.get("p99_ms"), "ms", "zmq ipc RTT p99",
            rtt["p99_ms"], "< 10 ms", lat.get("p99_ms", 1e9) < 10.0)
    mem = R.get("memory")
    if mem:
        for method in ("rss", "tracemalloc"):
            v = mem["ledger"][method]
            row(f"4. acker bytes/pending tree ({method})", v, "B", "dict int->int",
                mem["dict"][method], "< 100 B", v < 100.0)
        for method in ("rss", "tracemalloc"):
            v = mem["pending"][method]
            row(f"4. spout pending bytes/entry ({method})", v, "B",
                "RotatingMap of tuples", mem["rotmap"][method], "< 100 B", v < 100.0)
        wp = mem.get("worker_pending")
        if wp:
            row(f"4. worker RSS at {wp['trees']:,} pending trees", wp["rss_mb_at_end"], "MB",
                "", None, "", None)
            row("4. worker RSS per pending tree", wp["bytes_per_tree"], "B",
                "spout map + acker (rss)", mem["pending"]["rss"] + mem["ledger"]["rss"], "",
                None)
    idle = R.get("idle")
    if idle:
        loaded = ((tp.get("acked") or {}).get("cpu_pct_per_worker_loaded")) or []
        for i, v in enumerate(idle["cpu_pct_per_worker"]):
            base = loaded[i] if i < len(loaded) else None
            row(f"5. idle CPU, worker {i + 1}", v, "%", "same worker loaded", base,
                "< 2% of a core", v < 2.0)
    return rows


def print_table(rows: list[dict]) -> None:
    hdr = ("figure", "measured", "baseline", "base value", "ratio", "target", "meets")
    lines = []
    for r in rows:
        ratio = r["ratio"]
        lines.append((r["figure"], _fmt(r["value"], r["unit"]), r["baseline"],
                      _fmt(r["baseline_value"], r["unit"]),
                      "-" if ratio is None else f"{ratio:.3f}x", r["target"],
                      "" if r["meets"] is None else ("yes" if r["meets"] else "NO")))
    widths = [max(len(hdr[i]), *(len(line[i]) for line in lines)) for i in range(len(hdr))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    print(fmt.format(*hdr))
    print("  ".join("-" * w for w in widths))
    for line in lines:
        print(fmt.format(*line))


def print_details(R: dict) -> None:
    tp = R.get("throughput") or {}
    pipe = R.get("pipe") or {}
    pb = (pipe.get("batched") or {}).get("words_per_s")
    print()
    if pb:
        scale = pb / REFERENCE_PIPE_WORDS_PER_S
        print(f"machine speed vs the peers' reference machine (raw batched pipe): {scale:.2f}x; "
              "targets scaled by it: acked floor "
              f"{300e3 * scale / 1e3:.0f}k, unacked floor {600e3 * scale / 1e3:.0f}k words/s")
    for key in ("acked", "unacked"):
        r = tp.get(key)
        if r:
            cpu = ", ".join(f"{c:.0f}%" for c in r.get("cpu_pct_per_worker_loaded", []))
            print(f"throughput {key}: {r['sentences']:,} sentences, wall {r['wall_s']:.1f}s, "
                  f"steady window {r['steady_window_s']:.1f}s, failed {r['spout_failed']}, "
                  f"words counted {r['words_counted']:,}, worker CPU {cpu}, "
                  f"RSS {r['rss_mb']} MiB, max queue {max(r['queue_max'].values())}, "
                  f"spouts throttled in {_pct(r.get('throttled_fraction_steady'))} of heartbeats; "
                  f"GC {_pct(r.get('gc_fraction_of_worker_wall'))} of worker wall time "
                  f"({_gc_line(r.get('gc_pauses_all_workers') or {})})")
    lat = R.get("latency")
    if lat:
        print(f"latency: target {lat['rate_sentences_per_s']:,.0f} sentences/s ({lat['rate_basis']}), "
              f"achieved {lat.get('achieved_sentences_per_s', 0):,.0f}; {lat.get('n', 0):,} trees "
              f"({lat.get('unacked_in_window', 0)} still pending at the end, counted with their age) "
              f"measured by the spout after {lat['warmup_s']:.0f}s warm-up: p50 "
              f"{_fmt(lat.get('p50_ms'), 'ms')}, p99 {_fmt(lat.get('p99_ms'), 'ms')}, p99.9 "
              f"{_fmt(lat.get('p999_ms'), 'ms')}, max {_fmt(lat.get('max_ms'), 'ms')}; spouts "
              f"throttled in {_pct(lat.get('throttled_fraction_in_window'))} of heartbeats; "
              "runtime heartbeat reservoirs (whole run incl. warm-up): " +
              "; ".join(f"p50 {c['p50']:.2f} p99 {c['p99']:.2f} ms (n={c['n']})"
                        for c in lat.get("heartbeat_reservoir", []) if c))
        gcs = lat.get("gc_pauses_in_window_all_workers") or {}
        if gcs:
            print(f"latency window GC pauses (both workers): {_gc_line(gcs)}")
    idle = R.get("idle")
    if idle:
        print(f"idle: schedstat (ns-exact) "
              f"{', '.join(f'{c:.2f}%' for c in idle.get('cpu_pct_per_worker_schedstat', []))} "
              f"of a core; {idle['threads_per_worker']} threads per worker, stats freq "
              f"{idle['stats_freq_secs']}s, {idle['window_s']:.0f}s window")


def _git_describe() -> str | None:
    """The runtime's commit, with ``-dirty`` when the work tree has changes."""
    try:
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (head + ("-dirty" if dirty else "")) or None
    except (OSError, subprocess.SubprocessError):
        return None


def _json_safe(v: Any) -> Any:
    """NaN/inf -> null, so the file is strict JSON."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small N: a smoke run under a minute")
    ap.add_argument("--only", default="pipe,throughput,latency,memory,idle",
                    help="comma list of figures to run (pipe,throughput,latency,memory,idle)")
    ap.add_argument("--sentences", type=int, default=0,
                    help="sentences per throughput run (default 200k, 50k with --quick)")
    ap.add_argument("--parallelism", type=int, default=2,
                    help="executors per component (spout, split, count)")
    ap.add_argument("--max-pending", type=int, default=5000,
                    help="topology.max.spout.pending (per spout task)")
    ap.add_argument("--latency-rate", type=float, default=0,
                    help="sentences/s for the latency run (default: half the acked max)")
    ap.add_argument("--no-peers", action="store_true",
                    help="use the inline raw-pipe baseline even when ../shared/peers exists")
    ap.add_argument("--switch-interval", type=float, default=0,
                    help="diagnostic: sys.setswitchinterval(S) in the workers (set by the bench "
                         "spout's open); default: Python's 0.005")
    ap.add_argument("--gc-threshold", default="",
                    help="diagnostic: in the workers, gc.freeze() then 'off' (gc.disable) or "
                         "'g0,g1,g2' (gc.set_threshold)")
    ap.add_argument("--latency-trace", default="",
                    help="diagnostic: write (emit time, latency) pairs of the latency run here")
    ap.add_argument("--json-out", default=os.path.join(HERE, "results", "latest.json"))
    ap.add_argument("--memory-child", nargs=3, metavar=("KIND", "METHOD", "N"),
                    help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.memory_child:
        kind, method, n = a.memory_child
        print(json.dumps(memory_child(kind, method, int(n))))
        return 0
    only = {s.strip() for s in a.only.split(",") if s.strip()}
    global FORCE_INLINE
    FORCE_INLINE = a.no_peers
    if a.switch_interval:
        EXTRA_CONF["bench.switch_interval"] = a.switch_interval
    if a.latency_trace:
        EXTRA_CONF["bench.latency_trace"] = True
    if a.gc_threshold:
        EXTRA_CONF["bench.gc_threshold"] = a.gc_threshold
    t_start = time.monotonic()
    R: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "quick": a.quick,
        "host": {"cpus": os.cpu_count(), "python": platform.python_version(),
                 "platform": platform.platform()},
        "targets": TARGETS, "diagnostics": dict(EXTRA_CONF),
        "git": _git_describe(),
    }
    if "memory" in only:
        R["memory"] = fig_memory(a.quick)
    if "pipe" in only:
        R["pipe"] = fig_pipe(a.quick)
    if "throughput" in only:
        R["throughput"] = fig_throughput(a.quick, a)
    if "latency" in only:
        acked = (R.get("throughput") or {}).get("acked", {}).get("steady_words_per_s")
        R["latency"] = fig_latency(a.quick, a, acked)
    if "idle" in only:
        R["idle"] = fig_idle(a.quick, a)
    R["rows"] = build_rows(R)
    R["elapsed_s"] = time.monotonic() - t_start
    commit = R["git"] or "commit unknown"
    print(f"Squall bench {'(quick) ' if a.quick else ''}{R['time']} (squall {commit}) -- "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}; "
          "ratios are measured / baseline, same run")
    print()
    print_table(R["rows"])
    print_details(R)
    os.makedirs(os.path.dirname(os.path.abspath(a.json_out)), exist_ok=True)
    with open(a.json_out, "w") as fh:
        json.dump(_json_safe(R), fh, indent=2, default=str, allow_nan=False)
    print(f"\nJSON: {a.json_out} (total {R['elapsed_s']:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
