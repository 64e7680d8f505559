"""Profiling and debugging a running topology (Storm's "Profiling and Debugging"):
``squall profile`` / the REST API's /profiling endpoints make a worker write a thread dump,
a memory snapshot and a CPU flame graph into its log directory, which its host's logviewer
serves; ``squall debug`` makes its executors sample their emits into the events log the
logviewer's events page shows; a principal outside the topology's ACL is refused.

First against an in-process Nimbus (what it stores in ZooKeeper, its bounds), then on a
real cluster (test_ui_rest's: Nimbus, two supervisors, the UI and a logviewer, mutual TLS,
the endless word count)."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import time
import xml.etree.ElementTree as ET

import pytest
import yaml

from squall.client import profiling as prof
from squall.client.errors import InvalidRequest, LimitExceeded
from squall.deploy.certs import CertificateAuthority
from test_nimbus import cluster, conf, topology  # noqa: F401 - the in-process Nimbus
from test_cli_cluster import squall_cmd, started
from test_ui_rest import WebCluster
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration


#: The least share of its due samples a CPU profile must hold. The sampler wakes every
#: SAMPLE_SECS and needs the GIL to look: a worker's loop that let go of the GIL at every
#: round made a waiting thread wait for luck (10 samples of 200 in 2 s).
MIN_SAMPLED = 0.25


def assert_sampled_throughout(svg: str) -> None:
    """The flame graph's subtitle (N samples every I ms over T s) shows no starved sampler."""
    m = re.search(r"([\d,]+) samples every ([\d.]+) ms over ([\d.]+) s", svg)
    assert m, svg[:1000]
    samples, every, secs = int(m[1].replace(",", "")), float(m[2]), float(m[3])
    due = secs * 1000 / every
    assert samples >= MIN_SAMPLED * due, f"{samples} samples of {due:.0f} due: {m[0]}"


def test_nimbus_keeps_bounded_expiring_requests_and_debug_options(cluster):  # noqa: F811
    client, state = cluster.client, cluster.state
    tid = client.submit("wc", "", json.dumps({"topology.workers": 2}), topology())
    workers = sorted(state.get_assignment(tid)[0]["workers"])
    w = workers[0]
    r = client.set_worker_profiler("wc", w, "dumpjstack")
    assert (r.action, r.worker, r.topology_id, r.secs) == ("threads", w, tid, 0)
    assert prof.REQUEST_ID.match(r.id) and r.expires_secs == pytest.approx(
        r.time_secs + prof.PICKUP_SECS)
    cpu = client.set_worker_profiler("wc", w, "cpu", 30)
    stored = state.get_profile_requests(tid)
    assert [(x["id"], x["action"], x["secs"]) for x in stored] == \
        [(r.id, "threads", 0), (cpu.id, "cpu", 30)]
    pending = client.pending_profile_actions("wc")
    assert [p.id for p in pending.requests] == [r.id, cpu.id]
    assert [p.id for p in pending.active] == [cpu.id]
    client.set_worker_profiler("wc", w, "stop")
    assert not client.pending_profile_actions(topology_id=tid).active
    for bad, match in ((("10.0.0.9:1", "threads", 0), "has no worker '10.0.0.9:1'"),
                       ((w, "restart", 0), "unknown profiler action 'restart'"),
                       ((w, "cpu", 601), "1 to 600 seconds")):
        with pytest.raises(InvalidRequest, match=match):
            client.set_worker_profiler("wc", *bad)
    # Bounded: a worker's unexpired requests, then refused; expired ones are dropped.
    for _ in range(prof.MAX_PENDING_PER_WORKER - 3):
        client.set_worker_profiler("wc", w, "threads")
    with pytest.raises(LimitExceeded, match="not yet expired"):
        client.set_worker_profiler("wc", w, "threads")
    aged = [dict(x, time=x["time"] - 3600) for x in state.get_profile_requests(tid)]
    state.set_profile_requests(tid, aged)
    client.set_worker_profiler("wc", w, "memory", 5)
    assert [x["action"] for x in state.get_profile_requests(tid)] == ["memory"]

    # Debug: a component's own setting, the topology's, and the topology's off dropping all.
    d = client.debug("wc", "record", True, 100)
    assert {c: (o.enable, o.sampling_pct) for c, o in d.component_debug.items()} == \
        {"record": (True, 100.0)}
    client.debug("wc", "", True, 5)
    assert state.get_debug_options(tid) == {"record": {"enable": True, "pct": 100.0},
                                            "": {"enable": True, "pct": 5.0}}
    info = client.topology_info("wc")
    assert info.component_debug["record"].sampling_pct == 100
    assert info.component_debug[""].enable
    client.debug("wc", "numbers", True, 0)  # 0 is off, as Storm's UI sends it
    assert state.get_debug_options(tid)["numbers"] == {"enable": False, "pct": 0.0}
    for args, match in ((("nope", True, 10), "no component 'nope'"),
                        (("record", True, 101), "0 to 100"),
                        (("record", True, float("nan")), "0 to 100")):
        with pytest.raises(InvalidRequest, match=match):
            client.debug("wc", *args)
    client.debug("wc", "", False, 0)
    assert state.get_debug_options(tid) == {}
    # Removed with the topology.
    client.kill("wc", wait_secs=0)
    poll_for(lambda: state.get_storm(tid) is None, timeout=8, what="removal")
    assert state.get_profile_requests(tid) == [] and state.get_debug_options(tid) == {}
    assert not state._read(state.paths.profiler_config(tid), None)


@pytest.fixture
def web(tmp_path, zk_conf):
    yield from started(WebCluster(tmp_path, zk_conf))


def test_profile_and_debug_a_running_worker_through_the_cli_rest_and_logviewer(web):
    c = web
    t0 = time.monotonic()
    poll_for(lambda: c.http(f"http://127.0.0.1:{c.ui_port}/api/v1/cluster/summary")[0] == 200
             and c.http(f"http://127.0.0.1:{c.lv_port}/")[0] == 200, timeout=20,
             what="the UI and the logviewer answering\n" + c.logs())
    c.submit_word_count()
    tid = poll_for(lambda: next((t["id"] for t in c.ok("topology/summary")["topologies"]
                                 if t["status"] == "ACTIVE" and t["workersLive"] == 2), None),
                   timeout=30, what="word-count with 2 live workers\n" + c.logs())
    poll_for(lambda: c.acked() > 200, timeout=30, what="acks\n" + c.logs())
    page = c.ok(f"topology/{tid}")
    # The worker on the logviewer's host (supervisor 1's).
    mine = next(w for w in page["workers"] if w["host"] == "127.0.0.1")
    hp, port = f"127.0.0.1:{mine['port']}", mine["port"]
    assert mine["dumpsLink"].startswith(f"http://127.0.0.1:{c.lv_port}/dumps/")
    # The link opens the worker's page without the token (its path holds an encoded ':').
    status, body = c.http(mine["dumpsLink"], token=False)
    assert status == 200 and hp in str(body), (status, str(body)[:500])
    status, body = c.http(mine["eventLogLink"], token=False)
    assert status in (200, 404), (status, str(body)[:500])  # 404: no events sampled yet
    logs_dir = c.sup_dirs[0] / "logs"

    # The CLI lists the workers, then asks for a thread dump.
    r = c.run("profile", "word-count")
    assert r.returncode == 0 and hp in r.stdout, r.stdout + r.stderr
    r = c.run("profile", "word-count", hp, "threads", "-c", f"logviewer.port={c.lv_port}")
    assert r.returncode == 0 and "a thread dump" in r.stdout, r.stdout + r.stderr
    assert f"http://127.0.0.1:{c.lv_port}/dumps/{tid}/{hp}" in r.stdout, r.stdout
    # The REST API (Storm's paths, POST here): a memory snapshot after 1 s, 2 s of CPU.
    heap = c.ok(f"topology/{tid}/profiling/dumpheap/{hp}?secs=1", "POST")
    assert heap["status"] == "ok" and heap["id"] == hp and heap["action"] == "memory"
    cpu = c.ok(f"topology/{tid}/profiling/start/{hp}/2", "POST")
    assert cpu["action"] == "cpu" and cpu["secs"] == 2
    active = c.ok(f"topology/{tid}/profiling/pending")["profilerActive"]
    assert [a["requestId"] for a in active] == [cpu["requestId"]], active
    assert c.api(f"topology/{tid}/profiling/restartworker/{hp}", "POST")[0] == 400
    assert c.api(f"topology/{tid}/profiling/dumpjstack/10.9.9.9:1", "POST")[0] == 400
    # The UI asks a worker's host with the cluster's token: never a host the caller names.
    status, out = c.api(f"topology/{tid}/profiling/dumps/10.9.9.9:{hp.rsplit(':', 1)[1]}")
    assert status == 400 and "is not a worker of" in str(out), (status, out)

    def listed():
        files = c.ok(f"topology/{tid}/profiling/dumps/{hp}")["files"]
        kinds = {(f["kind"], f["name"].rsplit(".", 1)[1]): f for f in files}
        return kinds if {("threads", "txt"), ("memory", "txt"), ("cpu", "svg")} <= set(kinds) \
            else None
    kinds = poll_for(listed, timeout=30, what="the three dumps listed\n" + c.logs())
    t_dumps = time.monotonic()
    # Each through its signed logviewer link (no token: the link carries the right).
    status, dump = c.http(kinds[("threads", "txt")]["link"], token=False)
    assert status == 200 and '"MainThread"' in dump and "executor[" in dump, dump[:500]
    assert f"of worker {hp} of topology {tid}" in dump
    status, mem = c.http(kinds[("memory", "txt")]["link"], token=False)
    assert status == 200 and "started by this request" in mem and "Top " in mem, mem[:500]
    status, svg = c.http(kinds[("cpu", "svg")]["link"], token=False)
    assert status == 200, svg
    assert_sampled_throughout(svg)
    names = {r.get("data-name") for r in ET.fromstring(svg).iter()
             if r.get("data-name") is not None}
    user = [n for n in names if "word_count.py" in n]
    assert user, sorted(names)[:50]  # the topology's own functions, by file
    assert any(n.split(" (")[0].endswith(("next_tuple", "execute")) for n in user), user
    for f in (f for (kind, _), f in kinds.items() if kind in ("threads", "memory", "cpu")):
        st = os.stat(logs_dir / f["name"])
        assert stat.S_IMODE(st.st_mode) == 0o600, f["name"]

    # squall debug: the component of this worker samples every emit into its events log.
    comp = next(x for x in ("split", "count", "sentences") if x in mine["componentNumTasks"])
    r = c.run("debug", "word-count", comp, "100")
    assert r.returncode == 0 and f"{comp} 100%" in r.stdout, r.stdout + r.stderr
    cpage = c.ok(f"topology/{tid}/component/{comp}")
    assert cpage["debug"] is True and cpage["samplingPct"] == 100
    link = next(e["eventLogLink"] for e in cpage["executorStats"] if e["host"] == "127.0.0.1")
    assert f"component={comp}" in link

    def sampled():
        """The events page once it shows more than 10 of the component's events."""
        status, text = c.http(link, token=False)
        if status != 200 or "<table id=events>" not in text:
            return None
        rows = text.split("<table id=events>")[1].count(f"<td>{comp}</td>")
        return text if rows > 10 else None
    events = poll_for(sampled, timeout=20, what="more than 10 sampled events\n" + c.logs())
    assert "newest last" in events
    events_file = logs_dir / prof.events_name(tid, port)
    assert stat.S_IMODE(os.stat(events_file).st_mode) == 0o600
    with open(events_file) as fh:
        first = prof.parse_event(fh.readline())
    assert first["component"] == comp and first["values"].startswith("[")
    assert len(first["values"]) <= prof.EVENT_VALUES_CHARS
    if comp == "sentences":
        assert first["messageId"] is not None  # a spout's emits carry their message id
    # Off for the whole topology: the file stops growing.
    r = c.run("debug", "word-count", "--off")
    assert r.returncode == 0 and "debug sampling off" in r.stdout, r.stdout + r.stderr
    assert c.ok(f"topology/{tid}/component/{comp}")["debug"] is False

    def still():
        before = events_file.stat().st_size
        time.sleep(1.0)
        return events_file.stat().st_size == before or None
    poll_for(still, timeout=20, what="sampling to stop")

    # Outside the topology's ACL: refused, with the verb named.
    mallory = dict(c.conf, **CertificateAuthority(str(c.tmp / "pki")).issue("mallory").conf())
    (c.tmp / "mallory.yaml").write_text(yaml.safe_dump(mallory))
    env = dict(c.env, SQUALL_CONF=str(c.tmp / "mallory.yaml"))
    for args, verb in ((("profile", "word-count", hp, "threads"), "setWorkerProfiler"),
                       (("debug", "word-count", "50"), "debug"),
                       (("profile", "word-count"), "getTopologyInfo")):
        proc = subprocess.run(squall_cmd(*args), capture_output=True, text=True, env=env,
                              cwd=str(c.tmp), timeout=60)
        assert proc.returncode == 1 and f"mallory may not {verb} topology word-count" in \
            proc.stderr, proc.stdout + proc.stderr
    r = c.run("profile", "word-count", "10.9.9.9:1", "threads")
    assert r.returncode == 1 and "has no worker '10.9.9.9:1'" in r.stderr, r.stderr
    print(f"\ndumps listed {t_dumps - t0:.1f} s after the cluster started; "
          f"total {time.monotonic() - t0:.1f} s")
