"""The supervisor's /metrics when workers write odd heartbeat files (they run user code):
the scrape still answers, for every other worker, in exposition Prometheus accepts."""

import json
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from squall.client.metrics import TOPOLOGY_LABELS, topology_labels, topology_name_of
from squall.supervisor.metrics import SupervisorMetrics, WorkerCollector


def _worker(tmp_path, port, tasks, **extra):
    d = tmp_path / str(port)
    d.mkdir()
    hb = {"version": 1, "time": 1e12, "pid": port, "state": "running", "topology_id": "t-1",
          "worker_id": f"h:{port}", "tasks": tasks, **extra}
    (d / "heartbeat.json").write_text(json.dumps(hb))
    return SimpleNamespace(topology_id="t-1", port=port, pid=port, worker_dir=str(d))


def _scrape(workers, expected=()):
    reg = CollectorRegistry()
    reg.register(WorkerCollector(lambda: workers, "h", lambda: 1e13, lambda: expected))
    text = generate_latest(reg).decode()
    return {f.name: f for f in text_string_to_metric_families(text)}, text


GOOD = {"1": {"component": "split", "acked": 5, "executed": 5, "streams": {"default": [5, 10]},
              "metrics": {"records": {"type": "counter", "value": 3}}}}


def test_a_malformed_heartbeat_skips_that_worker_only(tmp_path):
    good = _worker(tmp_path, 6700, GOOD)
    bad = [_worker(tmp_path, 6701, {"2": {"component": "x", "streams": ["x"]}}),
           _worker(tmp_path, 6702, {"3": {"component": "x", "executed": "lots"}}),
           _worker(tmp_path, 6703, {}, executors={"e": {"task": 4, "queue": None}}),
           _worker(tmp_path, 6704, {"5": {"component": "x",
                                          "complete_hist": {"b": {"99999": 1}, "sum": 1,
                                                            "n": 1}}})]
    fams, _ = _scrape([good, *bad])
    acked = {s.labels["port"]: s.value for s in fams["squall_acked"].samples
             if s.name == "squall_acked_total"}
    assert acked["6700"] == 5
    assert {s.labels["port"] for s in fams["squall_worker_up"].samples} == \
        {"6700", "6701", "6702", "6703", "6704"}


def test_one_user_metric_name_has_one_type(tmp_path):
    a = _worker(tmp_path, 6700, GOOD)
    b = _worker(tmp_path, 6701, {"2": {"component": "count", "metrics": {
        "records": {"type": "gauge", "value": 1.5}}}})
    fams, text = _scrape([a, b])
    assert text.count("# TYPE squall_user_records") == 1
    assert [s.value for s in fams["squall_user_records"].samples
            if s.name == "squall_user_records_total"] == [3.0]


def test_an_assigned_worker_without_a_process_is_down(tmp_path):
    running = _worker(tmp_path, 6700, GOOD)
    fams, _ = _scrape([running], expected=[("t-1", 6700), ("t-1", 6701)])
    up = {s.labels["port"]: s.value for s in fams["squall_worker_up"].samples}
    assert up == {"6700": 1.0, "6701": 0.0}


def test_storms_metric_names_are_exported_prometheus_safe(tmp_path):
    """Storm's names (a shell child's "my-custom-shell-metric") keep their name in the
    heartbeat and reach Prometheus with underscores; two names of one task that read the
    same there give one sample, not a scrape Prometheus refuses."""
    w = _worker(tmp_path, 6700, {"1": {"component": "tester", "metrics": {
        "my-custom-shell-metric": {"type": "counter", "value": 2},
        "my_custom_shell_metric": {"type": "counter", "value": 9},
        "9lives": {"type": "gauge", "value": 1.0}}}})
    fams, text = _scrape([w])
    assert [s.value for s in fams["squall_user_my_custom_shell_metric"].samples
            if s.name.endswith("_total")] == [2.0]
    assert "squall_user__9lives" in fams


# --- topology labels: the name an operator selects by, the id of the run beside it ------

@pytest.mark.parametrize("tid, name", [
    ("word-count-3-1764000000", "word-count"),
    ("etl-2-1-1764000000", "etl-2"),        # a name ending in a number keeps it
    ("a-1-2-3-4", "a-1-2"),
    ("x-0-0", "x"),
    ("t-1", "t-1"),                          # not Nimbus's shape: the id is the name
    ("plain", "plain"),
    ("-1-2", "-1-2"),                        # no name before the numbers
    ("wc-1-١٢", "wc-1-١٢"),                  # only ASCII digits are Nimbus's numbers
])
def test_topology_name_of_a_nimbus_id(tid, name):
    assert topology_name_of(tid) == name
    assert topology_labels(tid) == [name, tid]


def test_a_known_name_wins_over_the_id():
    assert topology_labels("odd-id", "word-count") == ["word-count", "odd-id"]
    assert TOPOLOGY_LABELS == ["topology", "topology_id"]


def _run(tmp_path, tid, port, tasks):
    d = tmp_path / f"{tid}-{port}"
    d.mkdir()
    hb = {"version": 1, "time": 1e12, "pid": port, "state": "running", "topology_id": tid,
          "worker_id": f"h:{port}", "tasks": tasks, "gc_collections": [1, 0, 0],
          "executors": {"e": {"task": 1, "component": "split", "queue": 2}}}
    (d / "heartbeat.json").write_text(json.dumps(hb))
    return SimpleNamespace(topology_id=tid, port=port, pid=port, worker_dir=str(d))


def test_every_topology_series_is_labelled_by_name_and_id(tmp_path):
    """Two runs of one topology (killed and resubmitted: same name, new id) on one
    supervisor: every per-topology family of both carries topology="word-count", the
    ids apart in topology_id, and the text is exposition Prometheus parses."""
    old, new = "word-count-1-1764000000", "word-count-2-1764000100"
    tasks = {"1": {"component": "split", "acked": 5, "executed": 5, "pending": 1,
                   "busy_secs": 0.5, "streams": {"default": [5, 10]},
                   "complete_hist": {"b": {"10": 1}, "sum": 1.0, "n": 1},
                   "metrics": {"records": {"type": "counter", "value": 3},
                               "lag": {"type": "gauge", "family": "kafka_lag",
                                       "labels": {"topic": "t", "partition": "0"},
                                       "value": 4}}}}
    fams, text = _scrape([_run(tmp_path, old, 6700, tasks), _run(tmp_path, new, 6701, tasks)],
                         expected=[(new, 6702)])
    topology_fams = [f for f in fams.values() if f.samples and
                     f.name not in ("squall_supervisor_workers",)]
    assert len(topology_fams) >= 15, sorted(fams)
    for f in topology_fams:
        for s in f.samples:
            assert s.labels["topology"] == "word-count", (f.name, s)
            assert s.labels["topology_id"] in (old, new), (f.name, s)
    ups = {(s.labels["topology_id"], s.labels["port"]): s.value
           for s in fams["squall_worker_up"].samples}
    assert ups == {(old, "6700"): 1.0, (new, "6701"): 1.0, (new, "6702"): 0.0}
    assert 'topology="word-count",topology_id="word-count-2-1764000100"' in text


def test_the_restart_counter_is_labelled_by_name_and_id():
    m = SupervisorMetrics("sup-1", "h", lambda: [], lambda: 1.0)
    m.restarted("word-count-1-1764000000")
    m.restarted("word-count-2-1764000100")
    fams = {f.name: f for f in text_string_to_metric_families(
        generate_latest(m.registry).decode())}
    got = sorted((s.labels["supervisor"], s.labels["topology"], s.labels["topology_id"])
                 for s in fams["squall_supervisor_worker_restarts"].samples
                 if s.name.endswith("_total"))
    assert got == [("sup-1", "word-count", "word-count-1-1764000000"),
                   ("sup-1", "word-count", "word-count-2-1764000100")]


def test_a_connector_family_may_not_reuse_a_series_label(tmp_path):
    """A family gauge labelled ``topology_id`` (or ``host``) would repeat a label in its
    series, and Prometheus refuses the whole scrape: it is left out."""
    w = _worker(tmp_path, 6700, {"1": {"component": "k", "metrics": {
        "a": {"type": "gauge", "family": "kafka_lag",
              "labels": {"topology_id": "x", "partition": "0"}, "value": 1},
        "b": {"type": "gauge", "family": "kafka_end", "labels": {"host": "x"}, "value": 1}}}})
    fams, text = _scrape([w])
    assert "squall_kafka_lag" not in fams and "squall_kafka_end" not in fams
    assert fams["squall_worker_up"].samples
