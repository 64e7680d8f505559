#!/usr/bin/env python3
"""Spark bridge throughput and latency against the acker word count, in the same run.

Run from the repo root:  .venv/bin/python bench/spark.py [--seconds S] [--sizes 1000,10000]

Baseline: the acker word count of bench/bench.py (2 workers, every sentence a tracked
tuple tree; steady words/s), run before and after the bridge runs (the machine's speed
drifts); the ratios are against their mean. Bridge (bench/spark_topologies.py): a
reliable spout emitting the word count's words as ``[word, ts]`` (``ts`` = emit time,
one tuple tree per word) -> ``SparkBridgeBolt`` (1 executor, ``max_in_flight`` 2: the next
batch converts while ``fn`` runs; ``--in-flight 1`` for none), whose
``fn`` runs one Spark job per batch (``--job grouped``: group by word: count, min ts, max ts;
``--job total``: the same over the whole batch, no shuffle; collect) and
logs it. For each ``max_batch_size`` (default 1,000, 10,000, 100,000):

* tuples/s in steady state: warm-up is every batch holding a tuple emitted before the
  JVM was up (before ``fn``'s first call: those tuples waited for Spark to start) and
  the next ``--warmup-batches`` (2) batches; the window starts at the end of the last
  warm-up batch and runs ``--seconds`` (extended until it holds ``--min-batches``
  batches). Throughput = tuples in the batches ending inside the window / the time from
  the window's start to the end of its last batch (the window snapped to batch ends, so
  a partly done batch is neither counted nor its time charged; the unsnapped figure,
  tuples / nominal window, is in the JSON as ``tuples_per_s_nominal``);
* latency per batch from spout emit to the end of ``fn``, for its oldest tuple (min ts)
  and its newest (max ts): p50 and max over the window's batches; and ``fn``'s duration.

With ``topology.max.spout.pending`` = ``--pending-batches`` (default ``--in-flight`` + 2)
x the batch size, the spout keeps the bridge fed (a batch in ``fn``, the next one converted
and waiting, one full and waiting, one filling), so when the bridge is the bottleneck the latency is mostly queueing: about
pending / throughput. ``max_batch_secs`` (``--batch-secs``, 10 s) is set above the time
the spout takes to fill the largest batch, so batches close by size (the mean batch
size is reported). Progress on stderr; table on stdout; JSON to
bench/results/spark-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bench as B  # noqa: E402  (the acker baseline and its helpers)

try:
    from squall.bench import spark_topologies as st
    CODE_PATHS: list[str] = []
except ImportError:  # squall installed without bench/ (not editable): import it by path
    import spark_topologies as st  # type: ignore[no-redef]
    CODE_PATHS = [HERE]

log = B.log
pct = B.pct

#: Lines of the workers' logs reported as errors (Spark logs warnings at start-up).
ERROR_LINE = re.compile(r"\bERROR\b|Traceback|Exception\b|\bFATAL\b")


def read_batches(path: str) -> list[dict]:
    """The bridge fn's JSON lines so far (a last line still being written is skipped)."""
    out = []
    try:
        with open(path) as fh:
            for line in fh:
                if line.endswith("\n"):
                    out.append(json.loads(line))
    except FileNotFoundError:
        pass
    out.sort(key=lambda b: b["end"])
    return out


def warmup_count(batches: list[dict], extra: int) -> int | None:
    """How many of ``batches`` (in end order) are warm-up; None if not known yet.

    The JVM is up when ``fn`` is first called (the bridge starts the session before it):
    every batch with a tuple emitted before that waited for the JVM, and ``extra`` more
    batches after them are skipped too.
    """
    if not batches:
        return None
    jvm_up = min(b["start"] for b in batches)
    waited = sum(1 for b in batches if b["oldest"] < jvm_up)
    # the batches that waited are the first to end (fn runs in batch order), but count by time
    last_waited = max((i for i, b in enumerate(batches) if b["oldest"] < jvm_up), default=-1)
    n = max(waited, last_waited + 1) + extra
    return n if len(batches) > n else None


def _cpu(pids: dict[str, int]) -> dict[str, float]:
    import psutil
    out = {}
    for name, pid in pids.items():
        try:
            ct = psutil.Process(pid).cpu_times()
            out[name] = ct.user + ct.system
        except psutil.Error:
            out[name] = float("nan")
    return out


def _jvm_children(worker_pids: list[int]) -> dict[int, int]:
    """{java pid: worker pid} of the JVMs the workers started (pyspark's gateway)."""
    import psutil
    out = {}
    for wp in worker_pids:
        try:
            for c in psutil.Process(wp).children(recursive=True):
                if c.name() == "java":
                    out[c.pid] = wp
        except psutil.Error:
            pass
    return out


def _reap(jvms: list[int], timeout: float = 15.0) -> list[int]:
    """Wait for the JVMs of our workers to exit (pyspark's JVM exits when its Python
    parent's pipe closes); SIGKILL the ones still there. Only pids we recorded."""
    import psutil
    procs = []
    for pid in jvms:
        try:
            procs.append(psutil.Process(pid))
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    killed = []
    for p in alive:
        try:
            p.kill()
            killed.append(p.pid)
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=5)
    return killed


def scan_logs(lc: Any, limit: int = 8) -> dict:
    """Error-looking lines of the workers' logs (count and the first few, deduplicated)."""
    count, first = 0, []
    for w in lc.workers:
        try:
            with open(w.log_path, errors="replace") as fh:
                for line in fh:
                    if ERROR_LINE.search(line):
                        count += 1
                        line = line.strip()[:300]
                        if len(first) < limit and line not in first:
                            first.append(line)
        except OSError:
            pass
    return {"error_lines": count, "first": first}


SESSION_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) .*SparkSession "
                          r"started in ([0-9.]+) s")


def session_start(lc: Any) -> dict | None:
    """The bridge's own log line "SparkSession started in X s": X and when (epoch)."""
    for w in lc.workers:
        try:
            with open(w.log_path, errors="replace") as fh:
                for line in fh:
                    m = SESSION_LINE.search(line)
                    if m:
                        at = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S"))
                        return {"secs": float(m.group(3)), "at": at + int(m.group(2)) / 1000}
        except OSError:
            pass
    return None


def summarize(batches: list[dict], n_warm: int, t0: float, t_end: float) -> dict:
    win = [b for b in batches[n_warm:] if t0 < b["end"] <= t_end]
    tuples = sum(b["n"] for b in win)
    oldest = sorted(b["end"] - b["oldest"] for b in win)
    newest = sorted(b["end"] - b["newest"] for b in win)
    fn = sorted(b["fn_secs"] for b in win)
    before_fn = sorted(b["start"] - b["newest"] for b in win)
    snapped = win[-1]["end"] - t0 if win else float("nan")
    # fn's end -> the next fn's start: with the next batch waiting (max_in_flight 1), the
    # runner thread's work outside fn (Arrow conversion, createDataFrame) plus hand-offs
    seq = batches[n_warm - 1:]
    gaps = sorted(b["start"] - a["end"] for a, b in zip(seq, seq[1:])
                  if t0 < b["end"] <= t_end)
    return {
        "window_start": t0, "window_nominal_s": t_end - t0, "window_snapped_s": snapped,
        "batches": len(win), "tuples": tuples,
        "tuples_per_s": tuples / snapped if win else float("nan"),
        "tuples_per_s_nominal": tuples / (t_end - t0),
        "mean_batch": tuples / len(win) if win else float("nan"),
        "latency_oldest_p50_s": pct(oldest, 0.5),
        "latency_oldest_max_s": oldest[-1] if oldest else float("nan"),
        "latency_newest_p50_s": pct(newest, 0.5),
        "latency_newest_max_s": newest[-1] if newest else float("nan"),
        "fn_p50_s": pct(fn, 0.5), "fn_max_s": fn[-1] if fn else float("nan"),
        # the newest tuple's wait from its emit to fn's start: closing, Arrow, createDataFrame
        "newest_to_fn_start_p50_s": pct(before_fn, 0.5),
        "between_fn_calls_p50_s": pct(gaps, 0.5),
    }


def run_bridge(size: int, args: argparse.Namespace) -> dict:
    from squall.deploy.static import StaticCluster

    out_dir = tempfile.mkdtemp(prefix="sqbench-spark-")
    path = os.path.join(out_dir, "batches.jsonl")
    pending = (args.pending_batches or args.in_flight + 2) * size
    conf: dict[str, Any] = {
        # 2 workers, as the acker baseline: the even scheduler deals __acker, __acker,
        # spark, words round-robin, so the spout (+ an acker) and the bridge (+ an acker,
        # its Arrow conversion and Py4J calls, and the JVM it starts) are in different
        # processes and do not share a GIL; with 1 worker the spout and the bridge's
        # Python side would throttle each other on this 2-core machine.
        "topology.workers": args.workers,
        "topology.stats.freq.secs": 0.5,
        "topology.max.spout.pending": pending,  # per spout task; one tuple per msg id
        "topology.message.timeout.secs": 120,   # the first batches wait for the JVM to start
        st.OUT_KEY: path,
    }
    topology = st.bridge_topology(size, args.batch_secs, args.in_flight,
                                  args.job).create_topology()
    lc = StaticCluster(f"bench-spark-{size}", topology, conf, code_paths=CODE_PATHS,
                       stdout=subprocess.DEVNULL)
    res: dict[str, Any] = {"max_batch_size": size, "max_batch_secs": args.batch_secs,
                           "max_in_flight": args.in_flight, "job": args.job,
                           "max_spout_pending": pending, "workers": args.workers}
    jvms: dict[int, int] = {}
    try:
        t_launch = time.time()
        lc.start()
        pids = [w.proc.pid for w in lc.workers]
        log(f"bridge, batch {size:,}: {args.workers} worker(s) (pids {pids}), max pending "
            f"{pending:,}; waiting for the JVM")
        warm_deadline = time.monotonic() + args.startup_timeout
        hard_deadline = None
        n_warm = t0 = None
        pending_samples: list[float] = []
        cpu0 = None
        roles: dict[str, int] = {}
        next_progress = time.monotonic() + 10
        while True:
            if lc.crashed():
                raise RuntimeError("\n".join(lc.describe_exit(w) for w in lc.crashed()))
            batches = read_batches(path)
            now = time.time()
            if batches and not jvms:
                jvms = _jvm_children(pids)
                if not roles:
                    for w in lc.workers:
                        hb = lc.heartbeats().get(w.worker_id) or {}
                        comps = {s["component"] for s in hb.get("tasks", {}).values()}
                        for c in comps - {"__acker"}:
                            roles[f"{c} worker"] = w.proc.pid
            if n_warm is None:
                n_warm = warmup_count(batches, args.warmup_batches)
                if n_warm is not None:
                    t0 = batches[n_warm - 1]["end"]
                    jvm_up = min(b["start"] for b in batches)
                    res["jvm_up_after_s"] = jvm_up - t_launch
                    res["warmup_batches"] = n_warm
                    spark_started = batches[0].get("spark_started")
                    if spark_started:
                        res["spark_context_started_after_s"] = spark_started - t_launch
                    ss = session_start(lc)
                    if ss:  # getOrCreate's duration; what follows it is the first
                        # batch's Arrow conversion and createDataFrame (class loading, JIT)
                        res["session_start_s"] = ss["secs"]
                        res["session_ready_after_s"] = ss["at"] - t_launch
                    log(f"  JVM up {jvm_up - t_launch:.1f}s after launch; {n_warm} warm-up "
                        f"batches, steady window from {t0 - t_launch:.1f}s")
                    hard_deadline = time.monotonic() + max(3 * args.seconds, args.seconds + 90)
                    cpu_pids = dict(roles) or {f"worker {p}": p for p in pids}
                    for j in jvms:
                        cpu_pids[f"JVM {j}"] = j
                    cpu0 = (time.time(), _cpu(cpu_pids))
                elif time.monotonic() > warm_deadline:
                    raise TimeoutError(f"bridge batch {size}: only {len(batches)} batches "
                                       f"{args.startup_timeout:.0f}s after launch (warm-up "
                                       "not over)")
            else:
                in_win = [b for b in batches[n_warm:] if b["end"] > t0]
                spouts = [s for hb in lc.heartbeats().values()
                          for s in hb.get("tasks", {}).values() if s["component"] == st.SPOUT]
                if spouts:
                    pending_samples.append(sum(s.get("pending", 0) for s in spouts) / pending)
                if now >= t0 + args.seconds and len(in_win) >= args.min_batches:
                    t_end = max(t0 + args.seconds, in_win[args.min_batches - 1]["end"])
                    break
                if time.monotonic() > hard_deadline:
                    if len(in_win) < 2:
                        raise TimeoutError(f"bridge batch {size}: {len(in_win)} batches in "
                                           "the steady window before the deadline")
                    t_end = in_win[-1]["end"]
                    res["short_window"] = True
                    log(f"  deadline: only {len(in_win)} batches in the window")
                    break
            if time.monotonic() >= next_progress:
                log(f"  {len(batches)} batches, {sum(b['n'] for b in batches):,} tuples so far")
                next_progress = time.monotonic() + 10
            time.sleep(0.25)
        cpu1 = (time.time(), _cpu(cpu_pids))
        res["cpu_pct_in_window"] = {k: 100.0 * (cpu1[1][k] - cpu0[1][k]) / (cpu1[0] - cpu0[0])
                                    for k in cpu_pids}
        res.update(summarize(batches, n_warm, t0, t_end))
        res["spout_pending_fraction_mean"] = (sum(pending_samples) / len(pending_samples)
                                              if pending_samples else None)
        spouts = lc.task_stats(st.SPOUT)
        res["spout_emitted"] = sum(s.get("emitted", 0) for s in spouts)
        res["spout_failed"] = sum(s.get("failed", 0) for s in spouts)
        res["spout_timed_out"] = sum(s.get("timed_out", 0) for s in spouts)
        res["batches_all"] = [{k: (v - t_launch if k in ("oldest", "newest", "start", "end",
                                                            "spark_started") else v)
                               for k, v in b.items()} for b in batches]
        log(f"  {res['tuples_per_s']:,.0f} tuples/s over {res['window_snapped_s']:.1f}s "
            f"({res['batches']} batches of {res['mean_batch']:,.0f} on average); oldest "
            f"latency p50 {res['latency_oldest_p50_s']:.2f}s, fn p50 {res['fn_p50_s']:.2f}s")
    finally:
        if not jvms:
            jvms = _jvm_children([w.proc.pid for w in lc.workers])
        # errors while running, apart from the ones stopping causes (a batch still in fn
        # when the worker stops its SparkSession fails)
        res["worker_logs"] = scan_logs(lc)
        r = lc.stop(drain_secs=0)
        if r.crashed:
            log(f"  worker(s) exited badly: {r.crashed}")
            res["crashed"] = r.crashed
        after = scan_logs(lc)
        res["worker_logs_at_stop"] = {
            "error_lines": after["error_lines"] - res["worker_logs"]["error_lines"],
            "first": [x for x in after["first"] if x not in res["worker_logs"]["first"]]}
        killed = _reap(list(jvms))
        if killed:
            log(f"  JVM(s) {killed} outlived their worker: killed")
            res["jvms_killed"] = killed
        lc.cleanup()
        try:
            os.remove(path)
            os.rmdir(out_dir)
        except OSError:
            pass
    return res


def baseline(args: argparse.Namespace, when: str) -> dict:
    log(f"acker word count baseline ({when})")
    r = B.run_throughput(True, args.sentences, 2, 2000)
    return {k: r[k] for k in ("steady_words_per_s", "overall_words_per_s", "wall_s",
                              "spout_failed")}


def _s(v: Any) -> str:
    return "-" if v is None or (isinstance(v, float) and v != v) else f"{v:.2f} s"


def print_report(R: dict) -> None:
    base = R["baseline_words_per_s"]
    print(f"Spark bridge bench {R['time']} (squall {R['git'] or 'commit unknown'}) -- "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}, PySpark "
          f"{R['pyspark']}; ratios are measured / baseline, same run")
    print()
    runs = " / ".join(f"{b['steady_words_per_s']:,.0f}" for b in R["baselines"])
    print(f"  acker word count (baseline): {base:,.0f} words/s = 1.00x   "
          f"(steady; mean of the runs before / after: {runs})")
    for size in R["sizes"]:
        r = R["bridge"][str(size)]
        if "error" in r:
            print(f"  bridge batch {size:,}: FAILED: {r['error'].splitlines()[0]}")
            continue
        ratio = r["tuples_per_s"] / base if base else float("nan")
        print(f"  bridge batch {size:,}: {r['tuples_per_s']:,.0f} tuples/s = {ratio:.2f}x; "
              f"latency oldest p50 {_s(r['latency_oldest_p50_s'])} max "
              f"{_s(r['latency_oldest_max_s'])}; newest p50 {_s(r['latency_newest_p50_s'])} "
              f"max {_s(r['latency_newest_max_s'])}; fn p50 {_s(r['fn_p50_s'])}; "
              f"batches {r['batches']}")
    print()
    for size in R["sizes"]:
        r = R["bridge"][str(size)]
        if "error" in r:
            continue
        cpu = ", ".join(f"{k} {v:.0f}%" for k, v in r.get("cpu_pct_in_window", {}).items())
        frac = r.get("spout_pending_fraction_mean")
        logs = r.get("worker_logs", {})
        print(f"batch {size:,}: window {r['window_snapped_s']:.1f}s (nominal "
              f"{r['window_nominal_s']:.1f}s{', SHORT' if r.get('short_window') else ''}) after "
              f"{r['warmup_batches']} warm-up batches, JVM up (fn first called) "
              f"{r['jvm_up_after_s']:.1f}s after launch (SparkSession ready after "
              f"{_s(r.get('session_ready_after_s'))}, getOrCreate {_s(r.get('session_start_s'))})"
              f"; mean batch {r['mean_batch']:,.0f} tuples; fn max {_s(r['fn_max_s'])}, "
              f"newest tuple emit -> fn start p50 {_s(r['newest_to_fn_start_p50_s'])}, "
              f"fn end -> next fn start p50 {_s(r.get('between_fn_calls_p50_s'))}; spout "
              f"pending {'-' if frac is None else f'{frac:.0%}'} of max on average; failed "
              f"{r['spout_failed']}, timed out {r['spout_timed_out']}; CPU in window: {cpu}; "
              f"worker log error lines: {logs.get('error_lines', '?')} while running, "
              f"{r.get('worker_logs_at_stop', {}).get('error_lines', '?')} at stop")
        for line in logs.get("first", []):
            print(f"    log: {line}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000",
                    help="comma list of the bridge's max_batch_size, one run each")
    ap.add_argument("--seconds", type=float, default=20.0,
                    help="steady window per size (extended to hold --min-batches batches)")
    ap.add_argument("--min-batches", type=int, default=4,
                    help="batches the steady window must hold at least")
    ap.add_argument("--warmup-batches", type=int, default=2,
                    help="batches skipped after those that waited for the JVM")
    ap.add_argument("--batch-secs", type=float, default=10.0,
                    help="the bridge's max_batch_secs (above the time to fill a batch, so "
                         "batches close by size)")
    ap.add_argument("--pending-batches", type=int, default=0,
                    help="topology.max.spout.pending as a multiple of the batch size "
                         "(default: --in-flight + 2)")
    ap.add_argument("--workers", type=int, default=2, help="topology.workers of the bridge runs")
    ap.add_argument("--job", choices=("grouped", "total"), default="grouped",
                    help="fn's Spark job: per-word count/min/max (grouped, a shuffle) or the "
                         "same over the whole batch (total: moving the rows, no shuffle)")
    ap.add_argument("--in-flight", type=int, default=2,
                    help="the bridge's max_in_flight (default 2, the bolt's default)")
    ap.add_argument("--sentences", type=int, default=100_000,
                    help="sentences per acker word-count baseline run")
    ap.add_argument("--startup-timeout", type=float, default=180.0,
                    help="seconds from launch to the end of the warm-up before giving up")
    ap.add_argument("--json-out", default="",
                    help="default: bench/results/spark-<timestamp>.json")
    a = ap.parse_args(argv)
    sizes = [int(s.replace("_", "")) for s in a.sizes.split(",") if s.strip()]
    # SIGTERM as an exception, so the clusters' finally blocks stop their workers
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(128 + s))
    from importlib.metadata import version
    t_start = time.monotonic()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    R: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "git": B._git_describe(),
        "host": {"cpus": os.cpu_count(), "python": platform.python_version(),
                 "platform": platform.platform()},
        "pyspark": version("pyspark"), "args": vars(a), "sizes": sizes, "bridge": {},
    }
    R["baselines"] = [baseline(a, "before")]
    for size in sizes:
        try:
            R["bridge"][str(size)] = run_bridge(size, a)
        except (RuntimeError, TimeoutError, OSError) as exc:
            log(f"  bridge batch {size} failed: {exc}")
            R["bridge"][str(size)] = {"max_batch_size": size, "error": str(exc)}
    R["baselines"].append(baseline(a, "after"))
    base = sum(b["steady_words_per_s"] for b in R["baselines"]) / len(R["baselines"])
    R["baseline_words_per_s"] = base
    for r in R["bridge"].values():
        if "tuples_per_s" in r:
            r["ratio_to_baseline"] = r["tuples_per_s"] / base
    R["elapsed_s"] = time.monotonic() - t_start
    print_report(R)
    path = a.json_out or os.path.join(HERE, "results", f"spark-{stamp}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as fh:
        json.dump(B._json_safe(R), fh, indent=2, default=str, allow_nan=False)
    print(f"\nJSON: {path} (total {R['elapsed_s']:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
