"""The supervisor's /metrics when workers write odd heartbeat files (they run user code):
the scrape still answers, for every other worker, in exposition Prometheus accepts."""

import json
from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from squall.supervisor.metrics import WorkerCollector


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
