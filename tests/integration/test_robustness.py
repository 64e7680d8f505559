"""Bounded memory under a slow bolt, garbage on a worker's port, crashing user code."""

from __future__ import annotations

import os
import re
import random
import socket
import subprocess
import sys
import time
from collections import Counter

import msgpack
import pytest
import zmq

from squall.client import TopologyBuilder
from squall.worker.frame import PIPE_HWM
from topos import FanOut, FastSpout, NumberSpout, PacedSpout, RecordingBolt, events_of

pytestmark = pytest.mark.integration

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_slow_bolt_under_fast_spout_keeps_queues_bounded_and_loses_nothing(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", FastSpout(), 1)
    b.set_bolt("sink", RecordingBolt(), 1).shuffle_grouping("numbers")
    capacity, batch = 300, 50
    lc = cluster(b.create_topology(), {
        "test.spout.count": 1_000_000, "test.payload.bytes": 2000, "test.sleep.secs": 0.002,
        "topology.executor.receive.buffer.size": capacity,
        "topology.transfer.batch.size": batch,
        "topology.message.timeout.secs": 120})
    # Let the spout run flat out against a bolt doing ~500 tuples/s.
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) >= 1500, timeout=60,
                what="1500 acks")
    hbs = lc.heartbeats()
    queue_max = max(e["queue_max"] for hb in hbs.values() for k, e in hb["executors"].items()
                    if "sink" in k)
    emitted = len(events_of(lc.events_dir, "numbers", "emit"))
    # The queue stayed within its capacity plus what the two worker-to-worker pipes can hold
    # when congestion is signalled; the spout (> 20k/s unthrottled) emitted little more.
    in_flight = 2 * PIPE_HWM * batch
    assert queue_max <= capacity + in_flight, queue_max
    assert emitted < 1500 + capacity + in_flight + 500, emitted
    rss = max(hb["rss_bytes"] for hb in hbs.values())
    assert rss < 300 * 1024 * 1024, rss
    # Stop emitting and drain: everything emitted is acked, exactly once, nothing failed.
    assert lc.drain(60)
    acks = Counter(events_of(lc.events_dir, "numbers", "ack"))
    emits = events_of(lc.events_dir, "numbers", "emit")
    assert set(acks) == set(emits) and max(acks.values()) == 1
    assert events_of(lc.events_dir, "numbers", "fail") == []


def _heartbeats_after(lc, t):
    """The workers' heartbeats once every one was written after ``t`` (time.time()): a
    run shorter than topology.stats.freq.secs is over before its first heartbeat."""
    lc.wait_for(lambda: all(hb["time"] > t for hb in lc.heartbeats().values()),
                timeout=10, what="a heartbeat from every worker")
    return lc.heartbeats()


def test_a_spout_on_a_busy_worker_emits_at_the_pace_its_bolts_drain(cluster):
    """One worker, reliability off, no max pending: the spout shares the loop with a bolt
    that makes ten tuples of each of its, for a sink that takes 256 a step. The spout is
    called only while the loop's queues hold less than a step's worth (executor.BACKLOG),
    so the sink's queue stays a few steps long instead of filling up to the high water mark
    and pausing the topology (each round the spout made 1,280 tuples for the sink), and
    every tuple still arrives. (The sink drains a burst well within the longest hold,
    topology.spout.wait.max.millis, so the spout is never called over a backlog.)"""
    from squall.worker.executor import BACKLOG, SPOUT_BUDGET

    b = TopologyBuilder()
    # The hold is under test, not its cap: a stall of a busy machine must not end a hold.
    b.set_spout("numbers", NumberSpout(), 1) \
        .add_configuration("topology.spout.wait.max.millis", 5000)
    b.set_bolt("fanout", FanOut(), 1).shuffle_grouping("numbers")
    b.set_bolt("sink", RecordingBolt(), 1).shuffle_grouping("fanout")
    n, fanout = 1000, 10
    lc = cluster(b.create_topology(), {
        "topology.workers": 1, "topology.acker.executors": 0, "test.fanout": fanout,
        "test.spout.count": n})
    lc.wait_for(lambda: len(events_of(lc.events_dir, "sink", "got")) >= n * fanout,
                timeout=60, what=f"{n * fanout} tuples at the sink")
    hbs = _heartbeats_after(lc, time.time())
    queue_max = max(e["queue_max"] for hb in hbs.values() for k, e in hb["executors"].items()
                    if "sink" in k)
    # Under the mark, a call of the spout adds at most its budget's fan-out (twice, for a
    # fan-out step cut short by its time limit on a busy machine); 6,144 without the hold.
    assert queue_max <= BACKLOG + 2 * SPOUT_BUDGET * fanout, queue_max
    assert len(set(events_of(lc.events_dir, "sink", "got"))) == n * fanout


def test_a_backlog_a_spout_does_not_feed_does_not_hold_it(cluster):
    """A spout on a thread of its own keeps a slow bolt's queue thousands of tuples long
    (under the water marks: max pending 2,000). The loop's other spout, whose tuples never
    reach that bolt, is not held by its backlog (loop._share_queues), nor would it be for
    longer than topology.spout.wait.max.millis at a time (executor.drain_first): its
    paced pipeline finishes while the backlog lasts."""
    b = TopologyBuilder()
    b.set_spout("flood", NumberSpout(), 1).add_configurations({
        "topology.executor.threaded": True, "test.spout.count": 1_000_000,
        "topology.max.spout.pending": 2000})
    b.set_bolt("slow", RecordingBolt(), 1).shuffle_grouping("flood") \
        .add_configuration("test.sleep.secs", 0.002)
    b.set_spout("numbers", PacedSpout(), 1).add_configurations({
        "test.spout.count": 300, "test.spout.rate": 200})
    b.set_bolt("sink", RecordingBolt(), 1).shuffle_grouping("numbers")
    lc = cluster(b.create_topology(), {"topology.workers": 1})
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) == 300, timeout=30,
                what="the paced pipeline's 300 acks")
    hbs = _heartbeats_after(lc, time.time())
    backlog = max(e["queue_max"] for hb in hbs.values() for k, e in hb["executors"].items()
                  if "slow" in k)
    assert backlog >= 1000, backlog  # the other pipeline was backlogged meanwhile
    assert events_of(lc.events_dir, "numbers", "fail") == []


def test_garbage_sent_to_a_worker_port_is_dropped_and_the_worker_goes_on(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 2)
    b.set_bolt("sink", RecordingBolt(), 2).shuffle_grouping("numbers")
    n = 2000
    lc = cluster(b.create_topology(), {"test.spout.count": n, "test.sleep.secs": 0.001})
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) >= 100, timeout=30,
                what="first acks")
    rng = random.Random(7)
    for w in lc.workers:
        host, port = w.worker_id.rsplit(":", 1)
        # Raw bytes that are not even ZMTP.
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(bytes(rng.randrange(256) for _ in range(4096)))
        # Well-formed ZeroMQ messages carrying bad frames, from a peer holding the topology's
        # CurveZMQ key (a stranger does not get past the handshake: test_security.py).
        ctx = zmq.Context.instance()
        push = ctx.socket(zmq.PUSH)
        push.setsockopt(zmq.LINGER, 2000)
        public = lc.conf["topology.curve.public.key"].encode()
        push.curve_publickey, push.curve_serverkey = public, public
        push.curve_secretkey = lc.conf["topology.curve.secret.key"].encode()
        push.connect(f"tcp://{w.worker_id}")
        bad = [bytes(rng.randrange(256) for _ in range(200)), b"", msgpack.packb({"a": 1}),
               msgpack.packb([99, 0, []]), msgpack.packb([1, 7, []]),
               msgpack.packb([1, 0, "not a list"]),
               msgpack.packb([1, 0, [[424242, 1, "default", [1], None], "junk", [1, 2]]]),
               msgpack.packb([1, 0, [[1, 99999, "nostream", [1], None]]]),
               msgpack.packb([1, 1, 5, True])]
        for frame in bad:
            push.send(frame)
        push.close()
    lc.wait_for(lambda: sum(hb.get("dropped_frames", 0) for hb in lc.heartbeats().values())
                >= 2 * 8, timeout=20, what="bad frames counted")
    lc.wait_for(lambda: len(set(events_of(lc.events_dir, "numbers", "ack"))) == n, timeout=60,
                what="all acks after the garbage")
    assert all(w.proc.poll() is None for w in lc.workers)
    assert events_of(lc.events_dir, "numbers", "fail") == []


CRASH_TOPOLOGY = '''
from squall.client import TopologyBuilder
from squall.worker.frame import PIPE_HWM
from topos import NumberSpout, Crasher
CONF = {"topology.workers": 2, "test.spout.count": 50, "test.crash.on": 7,
        "test.events.dir": %r}
def topology():
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("crasher", Crasher(), 2).shuffle_grouping("numbers")
    return b
'''


def test_a_crashing_bolt_fails_the_local_run_with_its_error_visible(tmp_path):
    events = tmp_path / "events"
    events.mkdir()
    topo = tmp_path / "crash_topo.py"
    topo.write_text(CRASH_TOPOLOGY % str(events))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-m", "squall.cli", "local", str(topo),
                           "--duration", "60"], capture_output=True, text=True, timeout=90,
                          env=env, cwd=str(tmp_path))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    # One line: what raised, where in the user's code, the message; the traceback stays in
    # the worker's log (it used to be printed twice, 25 lines each, mostly Squall's frames).
    lines = [ln for ln in proc.stdout.splitlines() if "boom on tuple 7" in ln]
    assert len(lines) == 1, out
    assert re.match(r"\[squall local\] crasher raised RuntimeError at topos\.py:\d+ in execute "
                    r"\(raise RuntimeError\(f\"boom on tuple \{self\.on\}\"\)\): boom on tuple 7 "
                    r"\(worker 127\.0\.0\.1:\d+, pid \d+; the traceback is in \S+\.log\)$",
                    lines[0]), lines[0]
    assert "Traceback" not in out, out


def test_a_threaded_blocking_bolt_does_not_stall_the_rest_of_its_worker(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("sink", RecordingBolt(), 1).shuffle_grouping("numbers")
    b.set_spout("slow_numbers", NumberSpout(), 1)
    b.set_bolt("blocking", RecordingBolt(), 1).shuffle_grouping("slow_numbers") \
        .add_configuration("test.sleep.secs", 0.25) \
        .add_configuration("topology.executor.threaded", True)
    n = 500
    lc = cluster(b.create_topology(), {"topology.workers": 1, "test.spout.count": n})
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) == n, timeout=30,
                what="the fast pipeline's acks")
    # Meanwhile the blocking bolt (0.25 s per tuple) got through only a handful.
    assert len(events_of(lc.events_dir, "blocking", "got")) < n // 5


def slow_spout_beside_a_fast_pipeline(cluster, name, spout, conf, slow_n, fast_n):
    """Run ``spout`` (``slow_n`` tuples, ``conf`` on the component) beside a NumberSpout of
    ``fast_n`` in one worker until both are acked; returns the cluster and the slow spout's
    emit-to-ack lags in seconds."""
    b = TopologyBuilder()
    b.set_spout(name, spout, 1).add_configurations({"test.spout.count": slow_n, **conf})
    b.set_bolt(f"{name}-sink", RecordingBolt(), 1).shuffle_grouping(name)
    b.set_spout("numbers", NumberSpout(), 1).add_configuration("test.spout.count", fast_n)
    b.set_bolt("sink", RecordingBolt(), 1).shuffle_grouping("numbers")
    lc = cluster(b.create_topology(), {"topology.workers": 1})
    lc.wait_for(lambda: len(events_of(lc.events_dir, name, "ack")) == slow_n, timeout=30,
                what=f"the {name} spout's {slow_n} acks")
    emitted = dict(e.split() for e in events_of(lc.events_dir, name, "emit"))
    acked = dict(e.split() for e in events_of(lc.events_dir, name, "ack"))
    assert sorted(emitted) == sorted(acked), (emitted, acked)
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) == fast_n, timeout=30,
                what="the fast spout's acks")
    assert events_of(lc.events_dir, name, "fail") == []
    assert events_of(lc.events_dir, "numbers", "fail") == []
    return lc, sorted(float(acked[i]) - float(emitted[i]) for i in emitted)


def test_a_spout_that_sleeps_gets_its_acks_and_slows_only_itself(cluster):
    """A spout sleeping 0.1 s in every next_tuple (Storm's TestWordSpout) shares a worker
    with a fast pipeline: each of its tuples is acked within a second of its emit, and the
    fast spout's 3,000 tuples are all acked meanwhile. Once the loop saw it sleep, it runs
    on a thread of its own (it held the worker 12.8 s a step: 128 calls before any ack)."""
    from topos import SleepySpout
    # 30 sleeps of 0.1 s, and the acks after them: bounded by the sleeps, not a step of 128.
    lc, lags = slow_spout_beside_a_fast_pipeline(cluster, "sleepy", SleepySpout(),
                                                 {"test.sleep.secs": 0.1}, 30, 3000)
    assert lags[-1] < 1.0, lags
    log = lc.log_tail(lc.workers[0], lines=100_000)
    assert "spout sleepy: next_tuple took" in log and "runs on a thread of its own" in log, log
    assert "spout numbers: next_tuple took" not in log, log


def test_a_spout_stuck_in_its_first_next_tuple_leaves_the_worker_to_the_rest(cluster):
    """A spout whose very first next_tuple never returns held the worker's shared loop for
    good (it cannot be moved between calls: there is no next call): the loop goes on on a
    new thread, and the fast pipeline in the same worker gets all its acks."""
    from topos import StuckSpout
    b = TopologyBuilder()
    b.set_spout("stuck", StuckSpout(), 1)
    b.set_bolt("stuck-sink", RecordingBolt(), 1).shuffle_grouping("stuck")
    b.set_spout("numbers", NumberSpout(), 1).add_configuration("test.spout.count", 3000)
    b.set_bolt("sink", RecordingBolt(), 1).shuffle_grouping("numbers")
    lc = cluster(b.create_topology(), {"topology.workers": 1})
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) == 3000, timeout=30,
                what="the fast spout's acks")
    assert events_of(lc.events_dir, "numbers", "fail") == []
    log = lc.log_tail(lc.workers[0], lines=100_000)
    assert "executor[stuck:" in log and "the worker's other executors go on on a new thread" \
        in log, log


def test_a_spout_stuck_for_a_while_goes_on_on_its_own_thread(cluster):
    """A spout whose first next_tuple takes 2 s (a connection that takes its time) keeps the
    thread it blocked, on its own: once it returns, its tuples are emitted and each acked
    within a second of its emit; nothing of the rest of the worker failed meanwhile."""
    from topos import StuckSpout
    _, lags = slow_spout_beside_a_fast_pipeline(cluster, "stuck", StuckSpout(),
                                                {"test.block.secs": 2}, 20, 300)
    assert lags[-1] < 1.0, lags


def test_python_tuples_are_values_across_workers(cluster):
    """streamparse users emit tuples: ``emit((i, i * 2))`` crosses workers as a list would."""
    from topos import TupleEmitter
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("pairs", TupleEmitter(), 2).shuffle_grouping("numbers")
    b.set_bolt("sink", RecordingBolt(), 2).shuffle_grouping("pairs")
    n = 200
    lc = cluster(b.create_topology(), {"topology.workers": 2, "test.spout.count": n})
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) == n, timeout=30,
                what="every tree acked")
    got = sorted(events_of(lc.events_dir, "sink", "got"), key=lambda e: int(e.split()[0]))
    assert got == [f"{i} {i * 2}" for i in range(n)], got[:5]


def test_a_tuple_acked_twice_completes_its_tree_and_the_mistake_is_reported(cluster):
    """A bolt acking each tuple twice left 0 of 1,500 trees complete with no error: the
    second ack is refused (its XOR would undo the first) and reported once."""
    from topos import AckTwice
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("twice", AckTwice(), 1).shuffle_grouping("numbers")
    n = 300
    lc = cluster(b.create_topology(), {"topology.workers": 1, "test.spout.count": n})
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) == n, timeout=30,
                what="every tree acked")
    assert events_of(lc.events_dir, "numbers", "fail") == []
    errors = lambda: [e["error"] for hb in lc.heartbeats().values()  # noqa: E731
                      for e in hb.get("errors", [])]
    lc.wait_for(lambda: errors(), timeout=10, what="the error in the heartbeat")
    assert len(errors()) == 1, errors()
    assert "bolt 'twice' acked a tuple twice" in errors()[0], errors()


def test_a_value_no_worker_could_receive_is_refused_at_the_emit_with_one_worker(cluster):
    """A set works inside one worker and crashed the worker only when it crossed to
    another, blamed on __system; now the emit raises in the user's code, whatever the
    number of workers, naming component, stream, field and type."""
    from topos import EmitsASet
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("tagger", EmitsASet(), 1).shuffle_grouping("numbers")
    b.set_bolt("sink", RecordingBolt(), 1).shuffle_grouping("tagger")
    lc = cluster(b.create_topology(), {"topology.workers": 1, "test.spout.count": 10})
    lc.wait_for(lambda: bool(lc.crashed()), timeout=30, what="the worker to stop on the emit")
    text = lc.describe_exit(lc.crashed()[0]) + lc.log_tail(lc.workers[0], 400)
    assert "user code raised" in text, text
    assert ("component 'tagger' emitted on stream 'default' a value another worker could "
            "not receive: field 'tags' holds a builtins.set") in text, text
    assert "topology.serializers" in text and "__system" not in text


def test_a_chatty_bolt_cannot_fill_the_disk_its_worker_log_rotates(cluster):
    from topos import ChattyBolt
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 2)
    b.set_bolt("chatty", ChattyBolt(), 2).shuffle_grouping("numbers")
    n, limit = 2000, 64 * 1024
    lc = cluster(b.create_topology(), {"test.spout.count": n, "worker.log.max.bytes": limit,
                                       "worker.log.backups": 2})
    lc.wait_for(lambda: len(set(events_of(lc.events_dir, "numbers", "ack"))) == n, timeout=60,
                what="every message acked")
    for w in lc.workers:
        logs = sorted(os.listdir(os.path.dirname(w.log_path)))
        name = os.path.basename(w.log_path)
        assert f"{name}.1" in logs and f"{name}.2" in logs and f"{name}.3" not in logs, logs
        total = sum(os.path.getsize(os.path.join(os.path.dirname(w.log_path), f))
                    for f in logs if f.startswith(name))
        assert total <= 3 * limit, total  # no file passes the limit
    # ~1 MB per worker was written; the newest lines are in the current file.
    newest = 0
    for w in lc.workers:
        with open(w.log_path, errors="replace") as fh:
            newest = max([newest] + [int(line.split()[1]) for line in fh
                                     if line.startswith("chatty ")])
    assert newest >= n - 200
