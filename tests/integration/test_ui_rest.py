"""Storm's REST API v1, the Prometheus endpoints and the logviewer against a real cluster.

ZooKeeper, `squall nimbus`, two `squall supervisor` s (127.0.0.1 and 127.0.0.2, each with its
/metrics port), `squall ui` and a `squall logviewer`, as processes, with mutual TLS for
Nimbus and the cluster's HTTP token; the endless word count runs. What a Storm user's
scripts and dashboards rely on: Storm's field names, numbers that agree with `squall list`
and the spout's own heartbeat counts, actions that change the topology's status, 404 JSON
for what does not exist, every built-in metric family with its labels.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from squall.client.web import new_token
from squall.deploy.net import free_ports
from test_cli_cluster import Cluster, started
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

#: How often workers write stats and supervisors report them in this cluster (seconds).
STATS_SECS = 0.2
REPORT_SECS = 1.0
#: One stats interval as seen through the UI: a worker's write plus a supervisor's report.
INTERVAL = STATS_SECS + REPORT_SECS


class WebCluster(Cluster):
    def __init__(self, tmp_path, zk_conf):
        token_file = tmp_path / "http.token"
        token_file.write_text(new_token() + "\n")
        super().__init__(tmp_path, zk_conf, {"squall.http.token.file": str(token_file),
                                             "supervisor.heartbeat.frequency.secs": REPORT_SECS})
        self.token = token_file.read_text().strip()
        self.ui_port, self.lv_port, self.nimbus_metrics, *self.sup_metrics = free_ports(5)

    def start(self):
        self.start_daemon("nimbus", "nimbus", "-c", f"storm.local.dir={self.tmp / 'nimbus'}",
                          "-c", f"nimbus.metrics.port={self.nimbus_metrics}")
        for i, (d, ports) in enumerate(zip(self.sup_dirs, self.sup_ports)):
            self.start_daemon(f"supervisor{i + 1}", "supervisor", "-c", f"storm.local.dir={d}",
                              "-c", f"supervisor.slots.ports={json.dumps(ports)}",
                              "-c", f"storm.local.hostname=127.0.0.{i + 1}",
                              "-c", f"supervisor.metrics.port={self.sup_metrics[i]}")
        self.start_daemon("ui", "ui", "-c", f"ui.port={self.ui_port}",
                          "-c", f"logviewer.port={self.lv_port}")
        # The logviewer of the first supervisor's host.
        self.start_daemon("logviewer", "logviewer", "-c", f"storm.local.dir={self.sup_dirs[0]}",
                          "-c", f"logviewer.port={self.lv_port}")

    def http(self, url, method="GET", body=None, token=True):
        """(status, parsed JSON or text) of a request; never raises for an HTTP error (a port
        that does not answer is status 0)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        if token:
            req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status, raw, ctype = resp.status, resp.read(), resp.headers.get("Content-Type")
        except urllib.error.HTTPError as e:
            status, raw, ctype = e.code, e.read(), e.headers.get("Content-Type")
            e.close()
        except urllib.error.URLError as e:  # not listening (yet): status 0
            return 0, str(e.reason)
        text = raw.decode("utf-8", "replace")
        return status, (json.loads(text) if ctype and "json" in ctype else text)

    def api(self, path, method="GET", body=None):
        return self.http(f"http://127.0.0.1:{self.ui_port}/api/v1/{path}", method, body)

    def ok(self, path, method="GET", body=None):
        status, out = self.api(path, method, body)
        assert status == 200, (path, status, out)
        return out

    def metrics(self, port):
        status, text = self.http(f"http://127.0.0.1:{port}/metrics")
        assert status == 200, text
        return {f.name: f for f in text_string_to_metric_families(text)}


@pytest.fixture
def web(tmp_path, zk_conf):
    yield from started(WebCluster(tmp_path, zk_conf))


def test_rest_api_metrics_and_logviewer_on_a_running_cluster(web):
    c = web
    poll_for(lambda: c.http(f"http://127.0.0.1:{c.ui_port}/api/v1/cluster/summary")[0] == 200,
             timeout=20, what="the UI answering\n" + c.logs())
    # Every HTTP port asks for the token.
    status, err = c.http(f"http://127.0.0.1:{c.ui_port}/api/v1/cluster/summary", token=False)
    assert status == 401 and "squall.http.token.file" in err["errorMessage"]
    poll_for(lambda: c.http(f"http://127.0.0.1:{c.lv_port}/")[0] == 200, timeout=20,
             what="the logviewer answering\n" + c.logs())
    assert c.http(f"http://127.0.0.1:{c.lv_port}/", token=False)[0] == 401

    c.submit_word_count()  # both supervisors registered (their /metrics ports are up)
    assert c.http(f"http://127.0.0.1:{c.sup_metrics[0]}/metrics", token=False)[0] == 401
    rows = poll_for(lambda: [t for t in c.ok("topology/summary")["topologies"]
                             if t["status"] == "ACTIVE" and t["workersTotal"] == 2
                             and t["workersLive"] == 2] or None,
                    timeout=30, what="word-count ACTIVE with 2 live workers\n" + c.logs())
    t = rows[0]
    tid = t["id"]
    assert t["name"] == "word-count" and t["health"] == "ok" and t["owner"] == "tester"
    # 2 spout, 2 split, 2 count, 1 report executors, 2 ackers and the Topology Master
    assert t["uptime"].endswith("s") and t["executorsTotal"] == 10 and t["tasksTotal"] == 10
    poll_for(lambda: c.acked() > 500, timeout=30, what="acks\n" + c.logs())

    # The cluster, as `squall list` sees it.
    cs = c.ok("cluster/summary")
    assert (cs["supervisors"], cs["topologies"], cs["slotsTotal"], cs["slotsUsed"],
            cs["slotsFree"]) == (2, 1, 4, 2, 2)
    assert "2 supervisor(s), 2/4 slots used" in c.run("list").stdout
    sups = c.ok("supervisor/summary")["supervisors"]
    assert sorted(s["host"] for s in sups) == ["127.0.0.1", "127.0.0.2"]
    assert all(s["slotsTotal"] == 2 and s["uptimeSeconds"] >= 0 for s in sups)
    # Uptime is computed when asked (the registration record holds it as of then).
    first = {s["id"]: s["uptimeSeconds"] for s in sups}
    poll_for(lambda: all(s["uptimeSeconds"] > first[s["id"]]
                         for s in c.ok("supervisor/summary")["supervisors"]),
             timeout=3, interval=0.2, what="the supervisors' uptime to move")
    nims = c.ok("nimbus/summary")["nimbuses"]
    assert [(n["port"], n["status"]) for n in nims] == [(c.nimbus_port, "Leader")]
    conf = c.ok("cluster/configuration")
    assert conf["ui.port"] == c.ui_port and c.token not in json.dumps(conf)
    assert conf.get("storm.zookeeper.auth.payload") in (None, "<redacted>")

    # One topology, with Storm's fields (once a report carrying acks reached Nimbus).
    def counted():
        p = c.ok(f"topology/{tid}")
        split = next(b for b in p["bolts"] if b["boltId"] == "split")
        return p if p["spouts"][0]["acked"] and float(split["capacity"]) > 0 else None
    page = poll_for(counted, timeout=5 * INTERVAL, what="acks and capacity in the UI")
    assert page["window"] == ":all-time" and page["windowHint"] == "All time"
    assert [s["window"] for s in page["topologyStats"]] == ["600", "10800", "86400",
                                                             ":all-time"]
    assert [s["spoutId"] for s in page["spouts"]] == ["sentences"]
    assert sorted(b["boltId"] for b in page["bolts"]) == ["count", "report", "split"]
    spout = page["spouts"][0]
    for key in ("executors", "tasks", "emitted", "transferred", "acked", "failed",
                "completeLatency", "lastError", "errorHost", "errorPort", "errorTime",
                "errorLapsedSecs", "errorWorkerLogLink"):
        assert key in spout, key
    split = next(b for b in page["bolts"] if b["boltId"] == "split")
    for key in ("executed", "executeLatency", "processLatency", "capacity"):
        assert key in split, key
    # Squall's additions: when the counters were taken (a page's rates divide by its change),
    # unrounded latencies, errors grouped by text.
    assert abs(spout["statsTime"] - time.time()) < 10 * INTERVAL, spout["statsTime"]
    assert spout["completeLatencyMs"] > 0 and split["executeLatencyMs"] > 0
    assert page["errorGroups"] == [] and page["errors"] == []
    assert float(spout["completeLatency"]) > 0 and float(split["capacity"]) > 0
    assert sorted((w["host"], w["port"]) for w in page["workers"]) == \
        sorted({(w["host"], w["port"]) for w in page["workers"]})
    assert len(page["workers"]) == 2 and "__acker" not in {b["boltId"] for b in page["bolts"]}
    assert any(b["boltId"] == "__acker" for b in c.ok(f"topology/{tid}?sys=1")["bolts"])
    assert c.api(f"topology/{tid}?window=soon")[0] == 400

    # The numbers agree with the spout's own counts: deactivate, let the counters settle,
    # and the UI shows the heartbeats' total within one stats interval.
    assert c.ok(f"topology/{tid}/deactivate", "POST") == {
        "topologyOperation": "deactivate", "topologyId": tid, "status": "success"}
    assert c.listed()["word-count"][2] == "INACTIVE"
    settled = poll_for(lambda: (lambda a: a if a == c.acked() else None)(
        (time.sleep(3 * STATS_SECS), c.acked())[1]) if c.acked() else None,
        timeout=30, what="acks to settle after the deactivation")
    ui_acked = poll_for(lambda: (lambda n: n if n == settled else None)(
        c.ok(f"topology/{tid}")["spouts"][0]["acked"]), timeout=5 * INTERVAL,
        what=f"the UI to show the spout's {settled} acks")
    assert ui_acked == settled
    ten_min = c.ok(f"topology/{tid}?window=600")
    assert ten_min["window"] == "600" and ten_min["spouts"][0]["acked"] == settled
    assert c.ok(f"topology/{tid}/activate", "POST")["status"] == "success"
    assert c.listed()["word-count"][2] == "ACTIVE"

    # A component, its executors and their logs.
    comp = c.ok(f"topology/{tid}/component/sentences")
    assert comp["componentType"] == "spout" and comp["executors"] == 2
    assert [s["window"] for s in comp["spoutSummary"]][-1] == ":all-time"
    assert [o["stream"] for o in comp["outputStats"]] == ["default"]
    assert comp["componentErrorGroups"] == []
    # The spout's emits are all on its user stream, so ?sys=true counts the same here
    # (examples with system streams: test_ui_browser.py's Trident topology).
    assert [o["stream"] for o in c.ok(f"topology/{tid}/component/sentences?sys=true")[
        "outputStats"]] == ["default"]
    execs = comp["executorStats"]
    assert len(execs) == 2 and all(e["id"].startswith("[") for e in execs)
    mine = [e for e in execs if e["host"] == "127.0.0.1"]
    assert mine, execs  # the logviewer runs on supervisor 1's host
    link = mine[0]["workerLogLink"]
    assert link.startswith(f"http://127.0.0.1:{c.lv_port}/log?file=")
    status, log_page = c.http(link)
    assert status == 200 and "worker" in log_page.lower(), log_page[:500]
    raw_url = link.replace("/log?", "/api/v1/log?")
    status, raw = c.http(raw_url)
    assert status == 200 and raw
    assert c.http(f"http://127.0.0.1:{c.lv_port}/log?file=..%2F..%2Fsquall.yaml")[0] == 400
    assert c.http(f"http://127.0.0.1:{c.lv_port}/log?file=%2Fetc%2Fpasswd")[0] == 400
    bolt = c.ok(f"topology/{tid}/component/count")
    assert bolt["componentType"] == "bolt" and "boltStats" in bolt
    assert all("capacity" in e for e in bolt["executorStats"])

    vis = c.ok(f"topology/{tid}/visualization")
    assert vis["count"][":inputs"] == [{"component": "split", "stream": "default",
                                        "grouping": "fields"}]
    assert vis["sentences"][":type"] == "spout"
    assert c.ok(f"topology/{tid}/lag") == {}  # no Kafka spout: nothing to report
    workers = c.ok(f"topology-workers/{tid}")
    assert len(workers["hostPortList"]) == 2 and workers["logviewerPort"] == c.lv_port

    # What does not exist is a 404 with a message, as JSON.
    for path, method in (("topology/nope-1-1", "GET"), ("topology/nope-1-1/kill/0", "POST"),
                         (f"topology/{tid}/component/nope", "GET"), ("no/such/thing", "GET")):
        status, err = c.api(path, method)
        assert status == 404 and err["errorMessage"], (path, err)
    assert c.api(f"topology/{tid}/rebalance/0", "POST",
                 {"rebalanceOptions": {"numWorkers": "two"}})[0] == 400
    assert c.api(f"topology/{tid}/kill/-1", "POST")[0] == 400
    status, err = c.api(f"topology/{tid}/kill/{10 ** 30}", "POST")  # was a 500
    assert status == 400 and "0..2147483647" in err["errorMessage"], err

    # Prometheus: every built-in family, with its labels; counters move while it runs.
    families = ("squall_emitted", "squall_transferred", "squall_executed", "squall_acked",
                "squall_failed", "squall_timed_out", "squall_pending",
                "squall_complete_latency_ms", "squall_execute_latency_ms",
                "squall_busy_seconds", "squall_receive_queue_population", "squall_worker_up",
                "squall_worker_backpressure", "squall_worker_rss_bytes",
                "squall_worker_gc_collections", "squall_worker_dropped_frames",
                "squall_worker_uptime_seconds", "squall_supervisor_workers",
                "squall_supervisor_worker_restarts", "squall_supervisor_heartbeat_send_errors",
                "squall_user_distinct_words", "squall_user_increments")
    task_labels = {"topology", "topology_id", "component", "task", "host", "port"}

    def spout_acks():
        total = 0
        for port in c.sup_metrics:
            fams = c.metrics(port)
            total += sum(s.value for s in fams["squall_acked"].samples
                         if s.name == "squall_acked_total"
                         and s.labels["component"] == "sentences")
        return total

    def scrape_all():
        return [c.metrics(port) for port in c.sup_metrics]

    # The report bolt (the user metrics) runs on one of the two supervisors.
    scraped = poll_for(lambda: (lambda fs: fs if any("squall_user_increments" in f for f in fs)
                                else None)(scrape_all()),
                       timeout=10 * INTERVAL, what="user metrics on a supervisor")
    seen = {}
    for i, fams in enumerate(scraped):
        seen.update(fams)
        for s in fams["squall_emitted"].samples:
            assert task_labels | {"stream"} <= set(s.labels), s
            assert s.labels["host"] == f"127.0.0.{i + 1}"
        for s in fams["squall_acked"].samples:
            assert task_labels <= set(s.labels), s
        # Labelled by name, the run's id beside it (what a resubmission changes).
        assert {(s.labels["topology"], s.labels["topology_id"])
                for s in fams["squall_worker_up"].samples} == {("word-count", tid)}
        assert all(s.value == 1 for s in fams["squall_worker_up"].samples)
    missing = [f for f in families if f not in seen]
    assert not missing, missing
    assert any(s.name.endswith("_bucket") for s in seen["squall_complete_latency_ms"].samples)
    first = spout_acks()
    poll_for(lambda: spout_acks() > first, timeout=5 * INTERVAL, what="acked_total to grow")

    nimbus = c.metrics(c.nimbus_metrics)
    assert nimbus["squall_nimbus_is_leader"].samples[0].value == 1
    rpcs = {(s.labels["method"], s.labels["code"]) for s in nimbus["squall_nimbus_rpc"].samples
            if s.name == "squall_nimbus_rpc_total"}
    assert ("SendSupervisorWorkerHeartbeats", "OK") in rpcs
    assert ("GetTopologyInfo", "NOT_FOUND") in rpcs  # the 404s above
    assert "squall_nimbus_scheduling_rounds" in nimbus
    ui = c.metrics(c.ui_port)
    assert any(s.labels.get("status") == "404" for s in ui["squall_ui_requests"].samples)

    # Rebalance to one worker, then kill with a wait: the status follows.
    assert c.ok(f"topology/{tid}/rebalance/1", "POST",
                {"rebalanceOptions": {"numWorkers": 1}})["status"] == "success"
    poll_for(lambda: (lambda p: p["status"] == "ACTIVE" and p["workersTotal"] == 1)(
        c.ok(f"topology/{tid}")), timeout=30, what="rebalanced to 1 worker\n" + c.logs())
    assert c.ok(f"topology/{tid}/kill/1", "POST")["topologyOperation"] == "kill"
    poll_for(lambda: not c.ok("topology/summary")["topologies"], timeout=30,
             what="the topology removed after kill/1")
    assert c.api(f"topology/{tid}")[0] == 404
    assert os.path.exists(c.tmp / "ui.log")

    # Resubmitted (same name, new id): the supervisors' series keep topology="word-count",
    # so a dashboard or alert selecting by it carries on; only topology_id moves.
    c.submit_word_count()
    tid2 = poll_for(lambda: next((t["id"] for t in c.ok("topology/summary")["topologies"]
                                  if t["status"] == "ACTIVE" and t["workersLive"] == 2),
                                 None), timeout=30, what="word-count again\n" + c.logs())
    assert tid2 != tid

    def relabelled():
        scraped = scrape_all()

        def runs(family):
            return {(s.labels["topology"], s.labels["topology_id"]) for fams in scraped
                    for s in (fams[family].samples if family in fams else ())}
        return scraped if runs("squall_worker_up") == runs("squall_acked") == \
            {("word-count", tid2)} else None
    scraped = poll_for(relabelled, timeout=30,
                       what=f"the supervisors' series of {tid2} alone")
    for fams in scraped:
        for f in fams.values():
            for s in f.samples:
                if "topology" in s.labels:
                    assert (s.labels["topology"], s.labels["topology_id"]) in \
                        {("word-count", tid2), ("word-count", tid)}, (f.name, s)
