"""deploy/prometheus and deploy/grafana: the example configs parse, authenticate, and only use
metric families Squall actually exposes."""

from __future__ import annotations

import json
import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROMETHEUS_DIR = os.path.join(ROOT, "deploy", "prometheus")
PROMETHEUS_YML = os.path.join(PROMETHEUS_DIR, "prometheus.yml")
ALERTS_YML = os.path.join(PROMETHEUS_DIR, "squall-alerts.yml")
DASHBOARD_JSON = os.path.join(ROOT, "deploy", "grafana", "squall-dashboard.json")
README = os.path.join(ROOT, "README.md")
MONITORING_README = os.path.join(PROMETHEUS_DIR, "README.md")
SECURITY = os.path.join(ROOT, "SECURITY.md")
CONF_EXAMPLE = os.path.join(ROOT, "deploy", "squall.yaml.example")

# The paths the README's cluster section gives the token and the CA (make-certs.sh
# /etc/squall/pki): the scrape config must name the same ones.
TOKEN_FILE = "/etc/squall/http.token"
CA_FILE = "/etc/squall/pki/ca.pem"

# Every metric family Squall exposes, named as exposed: counters with _total, histograms
# without their _bucket/_sum/_count suffixes.
METRIC_FAMILIES = frozenset({
    # workers (served by the supervisor), per task
    "squall_emitted_total",
    "squall_transferred_total",
    "squall_executed_total",
    "squall_acked_total",
    "squall_failed_total",
    "squall_timed_out_total",
    "squall_pending",
    "squall_complete_latency_ms",
    "squall_execute_latency_ms",
    "squall_busy_seconds_total",
    "squall_receive_queue_population",
    # workers, per worker
    "squall_worker_up",
    "squall_worker_backpressure",
    "squall_worker_rss_bytes",
    "squall_worker_gc_collections_total",
    "squall_worker_dropped_frames_total",
    "squall_worker_uptime_seconds",
    # supervisor's own
    "squall_supervisor_workers",
    "squall_supervisor_worker_restarts_total",
    "squall_supervisor_heartbeat_send_errors_total",
    "squall_supervisor_zookeeper_seconds",
    # Nimbus
    "squall_nimbus_rpc_total",
    "squall_nimbus_rpc_seconds",
    "squall_nimbus_is_leader",
    "squall_nimbus_topologies",
    "squall_nimbus_scheduling_rounds_total",
    "squall_nimbus_scheduling_seconds",
    "squall_nimbus_zookeeper_seconds",
    # UI
    "squall_ui_requests_total",
    "squall_ui_request_seconds",
})
# The histograms among them: only these may appear with _bucket/_sum/_count.
HISTOGRAM_FAMILIES = frozenset({
    "squall_complete_latency_ms",
    "squall_execute_latency_ms",
    "squall_supervisor_zookeeper_seconds",
    "squall_nimbus_rpc_seconds",
    "squall_nimbus_scheduling_seconds",
    "squall_nimbus_zookeeper_seconds",
    "squall_ui_request_seconds",
})
assert HISTOGRAM_FAMILIES <= METRIC_FAMILIES
# Families whose names are chosen by topology code: allowed as a prefix only.
METRIC_PREFIXES = ("squall_user_",)
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

METRIC_RE = re.compile(r"squall_[a-z_]+")


def _known(token: str) -> bool:
    if any(token.startswith(p) and len(token) > len(p) for p in METRIC_PREFIXES):
        return True
    if token in METRIC_FAMILIES:
        return True
    for suffix in HISTOGRAM_SUFFIXES:
        if token.endswith(suffix) and token[: -len(suffix)] in HISTOGRAM_FAMILIES:
            return True
    return False


def _unknown_metrics(exprs):
    return sorted({t for e in exprs for t in METRIC_RE.findall(e) if not _known(t)})


def _load_yaml(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="module")
def prometheus():
    return _load_yaml(PROMETHEUS_YML)


@pytest.fixture(scope="module")
def alerts():
    return _load_yaml(ALERTS_YML)


@pytest.fixture(scope="module")
def dashboard():
    with open(DASHBOARD_JSON, encoding="utf-8") as f:
        return json.load(f)


def _alert_rules(alerts):
    return [r for g in alerts["groups"] for r in g["rules"]]


def _panels(dashboard):
    """All panels, including those nested in collapsed rows."""
    out = []
    for p in dashboard["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))
    return out


def _dashboard_exprs(dashboard):
    exprs = [t["expr"] for p in _panels(dashboard) for t in p.get("targets", [])]
    for v in dashboard["templating"]["list"]:
        q = v.get("query")
        exprs.append(q["query"] if isinstance(q, dict) else q)
    return exprs


def _balanced(expr: str) -> bool:
    pairs = {")": "(", "]": "[", "}": "{"}
    stack = []
    in_str = False
    for ch in expr:
        if ch == '"':
            in_str = not in_str
        elif in_str:
            continue
        elif ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                return False
    return not stack and not in_str


# --- the checker itself ----------------------------------------------------------------

def test_checker_accepts_families_suffixes_and_user_prefix():
    assert _unknown_metrics([
        "rate(squall_acked_total[1m])",
        "histogram_quantile(0.99, sum by (le) (rate(squall_complete_latency_ms_bucket[1m])))",
        "squall_nimbus_rpc_seconds_sum / squall_nimbus_rpc_seconds_count",
        "rate(squall_user_words_seen_total[1m])",
    ]) == []


def test_checker_rejects_unknown_names():
    assert _unknown_metrics(["rate(squall_acked[1m])", "squall_bogus_total", "squall_user_",
                             "squall_acked_total_bucket"]) == \
        ["squall_acked", "squall_acked_total_bucket", "squall_bogus_total", "squall_user_"]


# --- prometheus.yml -------------------------------------------------------------------

def test_prometheus_config_jobs(prometheus):
    assert prometheus["global"]["scrape_interval"] == "15s"
    jobs = {j["job_name"]: j for j in prometheus["scrape_configs"]}
    assert set(jobs) == {"squall-supervisors", "squall-nimbus", "squall-ui"}
    supervisors = [t for sc in jobs["squall-supervisors"]["static_configs"] for t in sc["targets"]]
    assert len(supervisors) == 2
    assert all(t.endswith(":9180") for t in supervisors)
    assert all(t.endswith(":9181")
               for sc in jobs["squall-nimbus"]["static_configs"] for t in sc["targets"])
    assert all(t.endswith(":8080")
               for sc in jobs["squall-ui"]["static_configs"] for t in sc["targets"])


def test_every_job_sends_the_bearer_token_over_https(prometheus):
    for job in prometheus["scrape_configs"]:
        name = job["job_name"]
        assert job.get("metrics_path", "/metrics") == "/metrics", name
        assert job["authorization"] == {"type": "Bearer", "credentials_file": TOKEN_FILE}, name
        assert "bearer_token" not in job and "credentials" not in job["authorization"], name
        assert job["scheme"] == "https", name
        assert job["tls_config"]["ca_file"] == CA_FILE, name


def test_prometheus_loads_the_alert_rules(prometheus):
    rule_files = [os.path.join(PROMETHEUS_DIR, f) for f in prometheus["rule_files"]]
    assert ALERTS_YML in rule_files


# --- squall-alerts.yml ----------------------------------------------------------------

def test_alert_rules_are_well_formed(alerts):
    rules = _alert_rules(alerts)
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names))
    for r in rules:
        assert isinstance(r["expr"], str) and r["expr"].strip(), r["alert"]
        assert _balanced(r["expr"]), r["alert"]
        assert r["labels"]["severity"] in {"warning", "critical"}, r["alert"]
        assert r["annotations"]["summary"], r["alert"]
        assert set(r) <= {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}


def test_alert_rules_cover_the_essentials(alerts):
    exprs = " ".join(r["expr"] for r in _alert_rules(alerts))
    for needle in ("squall_worker_up == 0",
                   "increase(squall_supervisor_worker_restarts_total[5m])) > 3",
                   "rate(squall_busy_seconds_total[5m])",
                   "squall_failed_total",
                   "max(squall_nimbus_is_leader) == 0"):
        assert needle in exprs


def test_alert_rules_use_only_known_metrics(alerts):
    exprs = [r["expr"] for r in _alert_rules(alerts)]
    assert any(METRIC_RE.search(e) for e in exprs)
    assert _unknown_metrics(exprs) == []


# --- the Grafana dashboard -------------------------------------------------------------

def test_dashboard_structure(dashboard):
    assert dashboard["schemaVersion"] == 39
    inputs = {i["name"]: i for i in dashboard["__inputs"]}
    assert inputs["DS_PROMETHEUS"]["type"] == "datasource"
    assert inputs["DS_PROMETHEUS"]["pluginId"] == "prometheus"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert {"topology", "component"} <= set(variables)
    assert "label_values(squall_acked_total, topology)" in variables["topology"]["definition"]
    assert variables["component"]["definition"].startswith("label_values(squall_acked_total")

    panels = _panels(dashboard)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    graphs = [p for p in panels if p["type"] != "row"]
    assert graphs and all(p["type"] == "timeseries" for p in graphs)
    for p in graphs:
        assert p["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]
        assert p["fieldConfig"]["defaults"]["unit"], p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]
            assert _balanced(t["expr"]), (p["title"], t["expr"])
        gp = p["gridPos"]
        assert 0 <= gp["x"] and gp["x"] + gp["w"] <= 24, p["title"]
    units = {p["fieldConfig"]["defaults"]["unit"] for p in graphs}
    assert {"ops", "ms", "percentunit", "bytes"} <= units


def test_dashboard_covers_the_main_families(dashboard):
    used = {t for e in _dashboard_exprs(dashboard) for t in METRIC_RE.findall(e)}
    for family in ("squall_acked_total", "squall_executed_total", "squall_emitted_total",
                   "squall_complete_latency_ms_bucket", "squall_execute_latency_ms_bucket",
                   "squall_busy_seconds_total", "squall_failed_total", "squall_pending",
                   "squall_receive_queue_population", "squall_worker_backpressure",
                   "squall_worker_rss_bytes", "squall_worker_gc_collections_total",
                   "squall_supervisor_worker_restarts_total", "squall_nimbus_rpc_total",
                   "squall_nimbus_scheduling_rounds_total", "squall_ui_requests_total"):
        assert family in used, family
    assert any('code!="OK"' in e for e in _dashboard_exprs(dashboard))


def test_dashboard_uses_only_known_metrics(dashboard):
    assert _unknown_metrics(_dashboard_exprs(dashboard)) == []


# --- one set of paths, one label to select by ------------------------------------------

def _text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _etc_paths(text):
    return set(re.findall(r"/etc/squall/[\w./-]*\w", text))


def test_the_scrape_config_names_the_paths_the_readme_names(prometheus):
    """The token and CA files Prometheus reads are the ones the README (and SECURITY.md,
    squall.yaml.example, deploy/prometheus/README.md) tell an operator to make: a copy
    of the CA at another path is a target down with an x509 error."""
    readme = _etc_paths(_text(README))
    assert {TOKEN_FILE, CA_FILE} <= readme
    for job in prometheus["scrape_configs"]:
        assert job["authorization"]["credentials_file"] in readme, job["job_name"]
        assert job["tls_config"]["ca_file"] in readme, job["job_name"]
    raw = _text(PROMETHEUS_YML)
    # Every /etc/squall path in the file, comments too, lives where the README's do.
    dirs = {os.path.dirname(p) for p in readme}
    assert all(os.path.dirname(p) in dirs for p in _etc_paths(raw)), _etc_paths(raw)
    assert CA_FILE in _etc_paths(_text(MONITORING_README))
    assert TOKEN_FILE in _etc_paths(_text(MONITORING_README))
    assert f"squall.tls.ca.file: {CA_FILE}" in _text(SECURITY)
    assert f'squall.tls.ca.file: "{CA_FILE}"' in _text(CONF_EXAMPLE)


def test_no_job_for_daemons_without_metrics(prometheus):
    """The logviewer and DRPC serve no /metrics (ui/logviewer.py, drpc/server.py): a job
    for them would be a target always down."""
    ports = {t.rsplit(":", 1)[1] for j in prometheus["scrape_configs"]
             for sc in j["static_configs"] for t in sc["targets"]}
    assert ports == {"9180", "9181", "8080"}


_ID_MATCHER = re.compile(r"topology_id\s*(=~|!~|!=|=)")


def test_rules_and_dashboard_select_by_topology_name(alerts, dashboard):
    """A topology keeps its name across a kill and a resubmission, not its id: no rule or
    panel matches on topology_id, and every rule that aggregates per topology keeps the
    name label."""
    exprs = [r["expr"] for r in _alert_rules(alerts)] + _dashboard_exprs(dashboard)
    assert [e for e in exprs if _ID_MATCHER.search(e)] == []
    for e in exprs:
        for by in re.findall(r"\bby \(([^)]*)\)", e):
            labels = {x.strip() for x in by.split(",")}
            assert "topology_id" not in labels or "topology" in labels, e
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["topology"]["query"]["query"] == \
        "label_values(squall_acked_total, topology)"
    crash = next(r for r in _alert_rules(alerts) if r["alert"] == "SquallWorkerCrashLoop")
    assert "sum by (supervisor, topology)" in crash["expr"]
