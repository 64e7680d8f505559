"""The file sink on real workers: exactly-once files across a kill -9, rotation, Parquet,
Trident's per-batch files under a replayed batch, a bad record and an unwritable directory.

Records are ``id,k,word`` (file_topos): the tests compare the published files' records, as a
sorted list (a duplicate shows), with every record the input makes.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

pytest.importorskip("fsspec")
pytest.importorskip("pyarrow")

from cluster_helpers import kill_and_wait, worker_heartbeats  # noqa: E402
from file_topos import expected_records, sink_topology, trident_files  # noqa: E402
from squall.deploy.local import LocalCluster  # noqa: E402
from zk_fixtures import poll_for  # noqa: E402

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))
#: topology.message.timeout.secs; waits are a few of these.
TIMEOUT = 6
#: topology.state.checkpoint.interval.ms
CHECKPOINT_MS = 300


def published(d) -> list[str]:
    """The published files' names (in-progress files are hidden: they start with a dot)."""
    if not os.path.isdir(d):
        return []
    return sorted(n for n in os.listdir(d) if not n.startswith("."))


def text_records(d) -> list[tuple[int, int, str]]:
    """Every record of the published text files; a partial line fails the test."""
    out = []
    for name in published(d):
        with open(os.path.join(d, name)) as fh:
            data = fh.read()
        assert data.endswith("\n"), f"{name} ends with a partial record: {data[-40:]!r}"
        for line in data.splitlines():
            i, k, w = line.split(",")
            out.append((int(i), int(k), w))
    return sorted(out)


def parquet_records(d) -> list[tuple[int, int, str]]:
    import pyarrow.parquet as pq

    out = []
    for name in published(d):
        t = pq.read_table(os.path.join(d, name)).to_pydict()
        out += zip(t["id"], t["k"], t["word"])
    return sorted(out)


def errors_of(heartbeats) -> list[str]:
    return [e["error"] for hb in heartbeats for e in hb.get("errors", [])]


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    base = tmp_path_factory.mktemp("files-local")
    lc = LocalCluster({"topology.stats.freq.secs": 0.2}, slots=4, base_dir=str(base))
    try:
        lc.start()
        if lc.redis is None:
            pytest.skip("Debian's redis-server is not installed")
        yield lc
    finally:
        lc.close("test done")


def sink_worker(lc) -> int | None:
    for hb in worker_heartbeats(lc):
        if "text" in {s.get("component") for s in hb.get("tasks", {}).values()}:
            return int(hb["pid"])
    return None


def test_kill_9_of_the_sinks_worker_leaves_every_record_once(local, tmp_path):
    """Barrier checkpointing, 2 workers, the text sink rotating every 4 KB and a Parquet sink:
    the worker of the text sink is killed -9 mid-run. The published files end with every
    record exactly once, none partial; the text records are spread over several files."""
    n = 3000
    text_dir, pq_dir = str(tmp_path / "text"), str(tmp_path / "parquet")
    name = "files-kill"
    conf = {"topology.workers": 2, "test.spout.count": n, "test.spout.rate": 400,
            "topology.state.provider": "redis",
            "trident.redis.key.prefix": f"squall-test-{name}-{os.getpid()}:",
            "topology.state.checkpoint.mode": "barrier",
            "topology.state.checkpoint.interval.ms": CHECKPOINT_MS,
            "topology.message.timeout.secs": TIMEOUT}
    local.submit(name, sink_topology(text_dir, pq_dir, rotate_bytes=4096), conf, HERE)
    expected = expected_records(n)
    try:
        poll_for(lambda: len(text_records(text_dir)) > len(expected) // 5, timeout=5 * TIMEOUT,
                 what="a fifth of the records published")
        victim = sink_worker(local)
        assert victim is not None
        before = len(text_records(text_dir))
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)

        def done():
            got = text_records(text_dir)
            assert len(got) == len(set(got)), "a record published twice"
            return got == expected and parquet_records(pq_dir) == expected
        try:
            poll_for(done, timeout=60 + 4 * TIMEOUT, what="every record published once")
        except BaseException:
            got = text_records(text_dir)
            print(f"text: {len(got)} records ({len(set(got))} distinct) of {len(expected)}; "
                  f"missing {sorted(set(expected) - set(got))[:10]}; files "
                  f"{published(text_dir)}; hidden "
                  f"{sorted(x for x in os.listdir(text_dir) if x.startswith('.'))}; "
                  f"parquet {len(parquet_records(pq_dir))}")
            raise
        print(f"\n{before} of {len(expected)} records published at the kill; all, once, "
              f"{time.monotonic() - killed_at:.1f} s after it; {len(published(text_dir))} "
              f"text files, {len(published(pq_dir))} Parquet files")
        assert before < len(expected)  # the kill came mid-run
        assert sink_worker(local) not in (None, victim)  # the supervisor restarted it
        assert len(published(text_dir)) >= 3  # rotated by size
        assert all(x.startswith(("text-0-", "text-1-")) and x.endswith(".txt")
                   for x in published(text_dir))
        assert all(x.endswith(".parquet") for x in published(pq_dir))
    finally:
        kill_and_wait(local, name)


def test_a_bad_record_is_reported_and_dropped_and_the_worker_lives(cluster, tmp_path):
    """Tuples without the format's ``id`` field: each reported with its content (at most
    once a second), dropped (under barrier checkpointing a failure would rewind the spouts
    for ever), the worker unharmed; every good record is published once."""
    n = 300
    out = str(tmp_path / "out")
    topo = sink_topology(out, short_every=50, sinks=1)
    lc = cluster(topo, {"test.spout.count": n, "topology.state.checkpoint.mode": "barrier",
                        "topology.state.checkpoint.interval.ms": CHECKPOINT_MS,
                        "topology.message.timeout.secs": TIMEOUT}, name="files-bad")
    expected = expected_records(n, skip_every=50)

    def reported():
        return [e for e in errors_of(lc.heartbeats().values())
                if "cannot be written" in e and "no field 'id'" in e]
    lc.wait_for(lambda: text_records(out) == expected and reported(), timeout=6 * TIMEOUT,
                what="the good records published and the bad one reported")
    assert "'word':" in reported()[0] and "it was dropped" in reported()[0]  # its content
    assert not lc.crashed()


def test_an_unwritable_output_directory_is_reported_by_path(cluster, tmp_path):
    (tmp_path / "a-file").write_text("")  # a directory under a file: refused even to root
    out = str(tmp_path / "a-file" / "out")
    lc = cluster(sink_topology(out, sinks=1), {
        "test.spout.count": 10, "topology.state.checkpoint.mode": "barrier",
        "topology.state.checkpoint.interval.ms": CHECKPOINT_MS,
        "topology.message.timeout.secs": TIMEOUT}, name="files-unwritable")
    lc.wait_for(lambda: any(f"output directory {out!r} is not writable" in e
                            for e in errors_of(lc.heartbeats().values())),
                timeout=4 * TIMEOUT, what="the unwritable directory reported")


def test_trident_file_state_writes_each_batch_once_under_replays(cluster, tmp_path):
    """Each partition writes a batch into ``part<p>-<txid>``; the commits of txids 3 and 7
    fail once after their files were published, so Trident replays them: the rename
    replaces those files whole and every record is in the files exactly once."""
    per_batch, batches = 20, 12
    out, markers = str(tmp_path / "out"), tmp_path / "markers"
    markers.mkdir()
    topo = trident_files(out, str(markers), per_batch, batches, fail=(3, 7))
    lc = cluster(topo, {"trident.transactional.state": "memory",
                        "topology.trident.batch.emit.interval.millis": 20,
                        "topology.max.spout.pending": 3,
                        "topology.message.timeout.secs": TIMEOUT}, name="files-trident")
    expected = expected_records(per_batch * batches)
    lc.wait_for(lambda: text_records(out) == expected and len(os.listdir(markers)) >= 2,
                timeout=6 * TIMEOUT, what="every batch's records once, txids 3 and 7 replayed")
    names = published(out)
    assert {x.split("-")[1].split(".")[0] for x in names} >= {f"{t:012d}" for t in
                                                             range(1, batches + 1)}


def test_acker_mode_writes_every_record_and_says_it_is_at_least_once(cluster, tmp_path):
    """Storm's checkpointing over the acker drives the same files (the sink's own state
    through the StatefulTask); the bolt reports that this mode is at-least-once."""
    n = 200
    out = str(tmp_path / "out")
    lc = cluster(sink_topology(out, sinks=1), {
        "test.spout.count": n, "topology.state.checkpoint.mode": "acker",
        "topology.state.checkpoint.interval.ms": CHECKPOINT_MS,
        "topology.message.timeout.secs": TIMEOUT}, name="files-acker")
    expected = expected_records(n)
    lc.wait_for(lambda: text_records(out) == expected, timeout=6 * TIMEOUT,
                what="every record published")
    assert any("at-least-once" in e and "barrier" in e
               for e in errors_of(lc.heartbeats().values()))
