"""Profiling and debugging a worker from the inside: the flame graph renderer, the sampler,
thread dumps, tracemalloc summaries, the profiler's requests and files, the events log and
its formatting, the debug options and the ACL verbs (client/profiling.py,
worker/flamegraph.py, worker/profiler.py)."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
import tracemalloc
import xml.etree.ElementTree as ET

import pytest

from squall.client import profiling as prof
from squall.client.errors import PermissionDenied
from squall.client.tls import Principal
from squall.nimbus.authorizer import Authorizer, TopologyAcl
from squall.worker import flamegraph
from squall.worker.profiler import (EventLog, Profiler, Sampler, memory_report, thread_dump)

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(autouse=True)
def no_tracing_left():
    yield
    tracemalloc.stop()  # it slows every allocation of the tests after


def rects(svg: str) -> dict[str, float]:
    root = ET.fromstring(svg)
    return {r.get("data-name"): float(r.get("width")) for r in root.iter(f"{SVG}rect")
            if r.get("data-name") is not None}


# --- flame graph ------------------------------------------------------------------------
def test_flame_graph_is_valid_svg_with_widths_proportional_to_samples():
    stacks = {("thread main", "run", "parse"): 30, ("thread main", "run", "write"): 10,
              ("thread other", "wait"): 60}
    svg = flamegraph.render(stacks, "CPU <profile> & more", "100 samples")
    widths = rects(svg)  # parses: valid XML
    assert widths["all"] == pytest.approx(flamegraph.WIDTH - 2 * flamegraph.PAD)
    assert widths["parse"] == pytest.approx(3 * widths["write"])
    assert widths["run"] == pytest.approx(widths["parse"] + widths["write"])
    assert widths["wait"] == pytest.approx(0.6 * widths["all"])
    assert "CPU &lt;profile&gt; &amp; more" in svg
    titles = [t.text for t in ET.fromstring(svg).iter(f"{SVG}title")]
    assert "parse (30 samples, 30.00%)" in titles
    assert "<script" not in svg
    # A child sits on its parent: one frame height above it (the root at the bottom).
    boxes = {r.get("data-name"): r for r in ET.fromstring(svg).iter(f"{SVG}rect")
             if r.get("data-name")}
    assert float(boxes["run"].get("y")) == float(boxes["thread main"].get("y")) - \
        flamegraph.FRAME_HEIGHT


def test_flame_graph_escapes_names_and_leaves_out_what_is_too_narrow():
    stacks = {("thread x", 'f<"&>\'g'): 1, ("thread x", "tiny"): 0, ("thread y", "big"): 100_000}
    svg = flamegraph.render(stacks)
    widths = rects(svg)
    assert 'f<"&>\'g' not in widths  # 1 of 100,001 samples: under MIN_PX
    assert "tiny" not in widths and "big" in widths
    assert flamegraph.collapsed({("a;b", "c"): 2, ("d",): 1}) == "a:b;c 2\nd 1\n"


def test_flame_graph_of_many_stacks_is_bounded():
    stacks = {("t", f"f{i}", f"g{i}"): 1 for i in range(50_000)}
    svg = flamegraph.render(stacks, width=100_000)
    assert len(rects(svg)) <= flamegraph.MAX_BOXES
    assert len(svg) < 200 * flamegraph.MAX_BOXES


# --- sampler and thread dump -----------------------------------------------------------
def spin_here(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(200))


def wait_here(stop: threading.Event) -> None:
    stop.wait(10)


def test_sampler_sees_a_named_threads_function():
    stop = threading.Event()
    t = threading.Thread(target=spin_here, args=(stop,), name="busy-worker", daemon=True)
    t.start()
    try:
        s = Sampler(interval=0.005)
        s.run(0.3)
    finally:
        stop.set()
        t.join()
    assert 10 <= s.samples <= 70, s.samples
    mine = {k: n for k, n in s.stacks.items() if k[0] == "thread busy-worker"}
    assert mine and all(any("spin_here (unit/test_profiling.py:" in f for f in k) for k in mine)
    assert sum(mine.values()) == s.samples  # one sample of the thread per look
    # The sampler's own thread is not sampled.
    assert not any(f.startswith("Sampler.run") for k in s.stacks for f in k)
    svg = flamegraph.render(s.stacks)
    assert "spin_here" in svg


def test_sampler_bounds_depth_and_distinct_stacks():
    s = Sampler(max_depth=3, max_stacks=1)

    def deep(n):
        if n:
            return deep(n - 1)
        s.sample()

    def other():
        s.sample()
    deep(10)
    other()
    assert all(len(k) <= 5 for k in s.stacks)
    assert any("[outer frames left out]" in k for k in s.stacks)
    assert any(k[-1] == "[more distinct stacks than kept]" for k in s.stacks)


def test_thread_dump_names_each_thread_and_its_frames():
    stop = threading.Event()
    t = threading.Thread(target=wait_here, args=(stop,), name="dump-me", daemon=True)
    t.start()
    try:
        time.sleep(0.05)
        text = thread_dump("Thread dump of a test", ["Executors: none"])
    finally:
        stop.set()
        t.join()
    assert text.startswith("Thread dump of a test\n")
    assert text.index('"MainThread"') < text.index('"dump-me"')
    block = text[text.index('"dump-me"'):].split("\n\n")[0]
    assert "in wait_here" in block and "stop.wait(10)" in block
    assert text.rstrip().endswith("Executors: none")


# --- memory ------------------------------------------------------------------------------
def allocate_here():
    return [bytes(1000) for _ in range(2000)]


def test_memory_report_lists_the_top_allocation_and_the_growth():
    tracemalloc.start(1)
    try:
        first = tracemalloc.take_snapshot()
        _, sizes = memory_report(first, ["header"])
        kept = allocate_here()
        text, _ = memory_report(tracemalloc.take_snapshot(), ["Memory of a test"], sizes)
    finally:
        tracemalloc.stop()
    assert text.startswith("Memory of a test\n")
    top = text.split("Top ")[1].split("By file:")[0]
    first_place = [line for line in top.splitlines() if line.strip().startswith("1.")][0]
    assert "test_profiling.py" in first_place, top
    assert "return [bytes(1000) for _ in range(2000)]" in top
    grown = text.split("Grown most since the previous snapshot:")[1].splitlines()[1]
    assert "test_profiling.py" in grown and "+" in grown
    assert len(kept) == 2000


# --- the profiler ------------------------------------------------------------------------
def write_requests(wdir, *reqs):
    prof.write_worker_files(str(wdir), list(reqs), {})


def request(rid, action, secs=0, at=None):
    return {"id": rid, "worker": "127.0.0.1:6700", "action": action, "secs": secs,
            "time": time.time() if at is None else at}


def files(log_dir):
    """The finished artifacts: not a writer's ``.name.tmp`` before its rename."""
    return sorted(n for n in os.listdir(log_dir) if not n.startswith("."))


def test_profiler_runs_each_request_once_and_writes_owner_only_files(tmp_path, monkeypatch):
    wdir, logs = tmp_path / "w", tmp_path / "logs"
    wdir.mkdir()
    logs.mkdir()
    p = Profiler(str(wdir), str(logs), "wc-1-17", 6700, "127.0.0.1:6700",
                 lambda: ["Executors: test"])
    write_requests(wdir, request("aaaa01", "threads"), request("aaaa02", "cpu", 1),
                   request("aaaa03", "memory", 1),
                   request("aaaa04", "threads", at=time.time() - 1000))  # expired
    p.poll()
    deadline = time.time() + 10
    while len(files(logs)) < 4 and time.time() < deadline:
        time.sleep(0.1)
    names = files(logs)
    assert len(names) == 4, names
    kinds = {}
    for name in names:
        m = prof.WORKER_ARTIFACT.match(name)
        assert m and m.group("tid") == "wc-1-17" and m.group("port") == "6700", name
        kinds[(m.group("kind"), m.group("ext"))] = name
        assert stat.S_IMODE(os.stat(logs / name).st_mode) == 0o600
    assert set(kinds) == {("threads", "txt"), ("cpu", "svg"), ("cpu", "collapsed"),
                          ("memory", "txt")}
    assert "aaaa04" not in " ".join(names)
    dump = (logs / kinds[("threads", "txt")]).read_text()
    assert "Thread dump of worker 127.0.0.1:6700 of topology wc-1-17" in dump
    assert '"MainThread"' in dump and "Executors: test" in dump
    mem = (logs / kinds[("memory", "txt")]).read_text()
    assert "started by this request" in mem and "covers only the memory allocated since" in mem
    ET.fromstring((logs / kinds[("cpu", "svg")]).read_text())
    assert tracemalloc.is_tracing()  # kept for the next request, which compares
    # The same requests again (the supervisor rewrote the file): nothing runs twice.
    write_requests(wdir, request("aaaa01", "threads"), request("aaaa02", "cpu", 1))
    os.utime(wdir / prof.PROFILER_FILE, (time.time() + 5, time.time() + 5))
    p.poll()
    time.sleep(0.3)
    assert files(logs) == names
    # A second memory request snapshots at once and shows the growth; idle, tracing stops.
    write_requests(wdir, request("aaaa05", "memory", 30))
    os.utime(wdir / prof.PROFILER_FILE, (time.time() + 6, time.time() + 6))
    t0 = time.monotonic()
    p.poll()
    while len(files(logs)) < 5 and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    assert time.monotonic() - t0 < 5  # not the request's 30 s
    second = [n for n in files(logs) if "aaaa05" in n][0]
    assert "Grown most since the previous snapshot" in (logs / second).read_text()
    monkeypatch.setattr("squall.worker.profiler.TRACE_IDLE_SECS", 0.0)
    t0 = time.monotonic()
    while tracemalloc.is_tracing() and time.monotonic() - t0 < 5:  # the job's end, then idle
        p.poll()
        time.sleep(0.02)
    assert not tracemalloc.is_tracing()
    # A new profiler of the same worker (a restart) knows what was done.
    assert {"aaaa01", "aaaa02", "aaaa03", "aaaa05"} <= \
        Profiler(str(wdir), str(logs), "wc-1-17", 6700, "127.0.0.1:6700").done


def test_profiler_stop_ends_a_cpu_profile_early_and_old_dumps_go(tmp_path, monkeypatch):
    monkeypatch.setattr(prof, "MAX_DUMPS_PER_WORKER", 3)
    wdir, logs = tmp_path / "w", tmp_path / "logs"
    wdir.mkdir()
    logs.mkdir()
    other = logs / "other-1-1-6701.threads-20250101-000000-abcdef.txt"
    other.write_text("another worker's")
    p = Profiler(str(wdir), str(logs), "wc-1-17", 6700, "127.0.0.1:6700")
    write_requests(wdir, request("bbbb01", "cpu", 60))
    p.poll()
    time.sleep(0.3)
    write_requests(wdir, request("bbbb01", "cpu", 60), request("bbbb02", "stop"))
    os.utime(wdir / prof.PROFILER_FILE, (time.time() + 5, time.time() + 5))
    t0 = time.monotonic()
    p.poll()
    while not any(n.endswith(".svg") for n in files(logs)) and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    assert time.monotonic() - t0 < 5
    for i in range(3):
        write_requests(wdir, request(f"cccc0{i}", "threads"))
        os.utime(wdir / prof.PROFILER_FILE, (time.time() + 10 + i, time.time() + 10 + i))
        p.poll()
        time.sleep(0.3)
    mine = [n for n in files(logs) if n.startswith("wc-1-17-6700.")]
    assert len(mine) == 3 and all("cccc0" in n for n in mine), mine
    assert other.exists()
    p.close()


# --- debug sampling: events ----------------------------------------------------------------
class Loud:
    def __repr__(self):
        raise RuntimeError("no")


def test_event_lines_are_bounded_json_that_cannot_forge_another_line():
    huge = "x" * 100_000
    line = prof.format_event(1700000000.123456, "split", 3, "default", 42,
                             [huge, b"\x00" * 50_000, 10 ** 5000, Loud(), "a\n{\"ts\": 1}"])
    assert line.endswith("\n") and line.count("\n") == 1
    ev = prof.parse_event(line)
    assert ev["component"] == "split" and ev["task"] == 3 and ev["stream"] == "default"
    assert ev["messageId"] == "42" and ev["ts"] == 1700000000.123
    assert len(ev["values"]) <= prof.EVENT_VALUES_CHARS
    assert ev["values"].startswith("['xxx")
    assert len(line) < 2 * prof.EVENT_VALUES_CHARS
    small = prof.parse_event(prof.format_event(1.0, "c", 1, "s", None,
                                               [10 ** 5000, Loud(), "a\nb", b"\x00" * 5000]))
    assert small["messageId"] is None
    assert small["values"].startswith("[<int of 16610 bits>, <Loud instance at ")
    assert "'a\\nb'" in small["values"] and "5,000 bytes" in small["values"]
    assert prof.bounded_repr(Loud()).startswith("<Loud instance")
    assert prof.parse_event("not json") is None and prof.parse_event("[1]") is None


def test_event_log_buffers_writes_owner_only_and_rotates(tmp_path):
    path = str(tmp_path / "wc-1-17-6700.events.log")
    ev = EventLog(path, max_bytes=4000)
    ev.log("split", 3, "default", None, ["the cow"])
    assert not os.path.exists(path)  # buffered until the worker's round flushes
    ev.flush()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with open(path) as fh:
        assert prof.parse_event(fh.readline())["values"] == "['the cow']"
    for i in range(100):
        ev.log("split", 3, "default", i, [f"sentence {i}"])
        ev.flush()
    ev.close()
    assert os.path.getsize(path) <= 4000 and os.path.getsize(path + ".1") <= 4000
    with open(path) as fh:
        last = [prof.parse_event(x) for x in fh][-1]
    assert last["messageId"] == "99"
    assert prof.WORKER_ARTIFACT.match(os.path.basename(path)).group("events")
    assert prof.WORKER_ARTIFACT.match(os.path.basename(path) + ".1")


def test_debug_options_resolve_as_storms_component_first():
    opts = {"": {"enable": True, "pct": 10.0}, "count": {"enable": False, "pct": 0},
            "split": {"enable": True, "pct": 100}}
    assert prof.sampling_pct(opts, "split") == 100
    assert prof.sampling_pct(opts, "sentences") == 10  # the topology's
    assert prof.sampling_pct(opts, "count") == 0       # its own off wins
    assert prof.sampling_pct(opts, "__acker") == 0     # system components: only by name
    assert prof.sampling_pct({"__acker": {"enable": True, "pct": 5}}, "__acker") == 5
    assert prof.sampling_pct({"x": {"enable": True, "pct": "nan"}}, "x") == 0
    for bad in (-1, 101, float("nan"), float("inf"), "ten"):
        with pytest.raises(ValueError):
            prof.check_pct(bad)


def test_actions_secs_and_which_requests_are_live():
    assert prof.canonical_action("dumpjstack") == "threads"
    assert prof.canonical_action("HEAP") == "memory"
    assert prof.canonical_action("start") == "cpu"
    with pytest.raises(ValueError, match="unknown profiler action 'restart'"):
        prof.canonical_action("restart")
    assert prof.check_secs("threads", 99) == 0
    assert prof.check_secs("cpu", 0) == prof.DEFAULT_SECS
    for bad in (0.5, prof.MAX_SECS + 1, float("nan")):
        with pytest.raises(ValueError):
            prof.check_secs("cpu", bad)
    now = 1000.0
    reqs = [request("dddd01", "cpu", 30, at=now - 10), request("dddd02", "threads", at=now - 200),
            request("dddd03", "cpu", 5, at=now - 10), {"id": "../x", "action": "cpu"},
            request("dddd04", "cpu", 60, at=now - 5) | {"worker": "127.0.0.1:6701"},
            request("dddd05", "stop", at=now - 1) | {"worker": "127.0.0.1:6701"}]
    assert [r["id"] for r in prof.live_requests(reqs, now)] == \
        ["dddd01", "dddd03", "dddd04", "dddd05"]
    assert [r["id"] for r in prof.active_profiles(reqs, now)] == ["dddd01"]


def test_worker_files_are_written_only_when_changed(tmp_path):
    prof.write_worker_files(str(tmp_path), [request("eeee01", "threads", at=1.0)],
                            {"": {"enable": True, "pct": 5.0}})
    before = os.stat(tmp_path / prof.PROFILER_FILE).st_mtime_ns
    time.sleep(0.01)
    prof.write_worker_files(str(tmp_path), [request("eeee01", "threads", at=1.0)],
                            {"": {"enable": True, "pct": 5.0}})
    assert os.stat(tmp_path / prof.PROFILER_FILE).st_mtime_ns == before
    assert prof.read_requests(str(tmp_path))[0]["id"] == "eeee01"
    assert prof.read_debug(str(tmp_path)) == {"": {"enable": True, "pct": 5.0}}
    (tmp_path / prof.DEBUG_FILE).write_text("[1, 2]")
    assert prof.read_debug(str(tmp_path)) == {}


# --- who may -------------------------------------------------------------------------------
@pytest.mark.parametrize("verb", ["setWorkerProfiler", "getComponentPendingProfileActions",
                                  "debug"])
def test_profiling_and_debug_verbs_follow_the_topologys_acl(verb):
    authz = Authorizer({"nimbus.admins": ["root"], "nimbus.supervisor.users": ["supervisor"]})
    acl = TopologyAcl("wc", "alice", frozenset({"bob"}), frozenset({"ops"}))
    for who in (Principal("alice"), Principal("bob"), Principal("carol", frozenset({"ops"})),
                Principal("root")):
        authz.check(verb, who, acl)
    for who in (Principal("mallory"), Principal("supervisor")):
        with pytest.raises(PermissionDenied, match=f"{who.name} may not {verb} topology wc"):
            authz.check(verb, who, acl)


def test_artifact_names_do_not_pass_for_logs_or_each_other():
    from squall.client.contract import WORKER_LOG
    name = prof.dump_name("wc-3-1700000000", 6700, "cpu", "20250101-120000", "a1b2c3", "svg")
    m = prof.WORKER_ARTIFACT.match(name)
    assert (m.group("tid"), m.group("port"), m.group("kind")) == ("wc-3-1700000000", "6700",
                                                                  "cpu")
    assert not WORKER_LOG.match(name)
    assert not WORKER_LOG.match(prof.events_name("wc-3-1700000000", 6700))
    for bad in ("wc-1-6700.cpu-2025-a1b2c3.svg", "wc-1-6700.cpu-20250101-120000-XYZ.svg",
                "wc-1-6700.cpu-20250101-120000-a1b2c3.html", "wc-1-6700.events.log.12",
                "wc-1-6700.log"):
        assert not prof.WORKER_ARTIFACT.match(bad), bad
    assert json.loads(json.dumps(prof.ACTIONS))
