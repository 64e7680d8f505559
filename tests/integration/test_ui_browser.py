"""The UI in a real browser: Debian's headless Chromium, driven by Playwright, against a
LocalCluster started with ``web=True`` (private ZooKeeper, Nimbus, a supervisor, the UI and
a logviewer).

* the word-count example on the topology page: tables, graph, and live charts with axes
  whose points come one per stats report and are never a false zero, though the page polls
  more often than counts arrive; then the cluster page, where a supervisor's uptime moves
  between two refreshes (full-page screenshots of both are kept; nothing on either is
  wider than the page);
* a Trident topology's page: graph labels cover no label or node, tables fit the page, one
  error reported several times is one row with its count (a full-page screenshot is kept);
* the Kill button with a wait time: the topology goes KILLED, then is removed after the wait;
* the page-load time of a topology with ~50 executors (measured and reported, not asserted;
  written to ``ui-page-load.json`` beside the screenshot);
* an unknown topology id: the page shows the REST API's 404 message.

Nothing is downloaded: Playwright drives ``/usr/bin/chromium`` (``scripts/setup.sh`` installs
it); ``playwright install`` is never needed. Artifacts go to ``$SQUALL_TEST_ARTIFACTS``
(default: ``test-artifacts/`` at the repo root); the README's screenshots in docs/ are
``ui-cluster.png``, ``ui-topology.png``, ``ui-trident.png`` and ``ui-kafka-lag.png`` from there,
taken with ``SQUALL_UI_CHART_POINTS=24`` (charts with two minutes of points).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from squall.client import config as cfg
from squall.client.topology import TopologyBuilder
from test_profiling import assert_sampled_throughout
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(REPO, "examples")
APP_JS = os.path.join(REPO, "ui", "static", "app.js")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}

#: How often the supervisor reports its workers' counters to Nimbus: Squall's default (not
#: squall local's 1 s), so counts reach the page more slowly than it polls, as on a cluster.
REPORT_SECS = 5
#: The daemons' conf: the UI on a free port (not 8080, which a real `squall ui` may hold).
CLUSTER_OVERRIDES = {cfg.UI_PORT: 0, cfg.SUPERVISOR_HEARTBEAT_FREQUENCY_SECS: REPORT_SECS}
#: Slots: the three topologies of this module (2 + 1 + 2 workers) fit side by side.
SLOTS = 6
#: Bound on a submitted topology's workers starting and its spout acking (a cold worker
#: imports Squall and the example in well under 10 s; 2 CPUs shared with a browser).
STARTUP_SECS = 60


def _page_poll_secs() -> float:
    """How often the page refreshes (POLL_MS in app.js): the unit of the page's waits."""
    with open(APP_JS, encoding="utf-8") as fh:
        m = re.search(r"const POLL_MS = (\d+);", fh.read())
    assert m, f"{APP_JS} no longer defines POLL_MS"
    return int(m.group(1)) / 1000


POLL_SECS = _page_poll_secs()
#: Playwright's default timeout for an action or a selector: a few page refreshes.
UI_TIMEOUT_MS = int(5 * POLL_SECS * 1000)
#: Rates a chart must have before its points are judged: one per report after the first.
#: More fill the charts of the screenshots (SQUALL_UI_CHART_POINTS=24: two minutes).
CHART_POINTS = int(os.environ.get("SQUALL_UI_CHART_POINTS", "4"))
#: Bound on those: the reports they need, plus two for the page's polls and the worker's
#: stats interval landing between reports.
CHART_TIMEOUT_MS = int((CHART_POINTS + 3) * REPORT_SECS * 1000)


def artifacts_dir() -> str:
    path = os.environ.get("SQUALL_TEST_ARTIFACTS") or os.path.join(REPO, "test-artifacts")
    os.makedirs(path, exist_ok=True)
    return path


def word_count_example():
    """examples/word_count.py as the module ``word_count``, the name the workers import it
    by (the examples folder is the uploaded package)."""
    sys.path.insert(0, EXAMPLES)
    try:
        return importlib.import_module("word_count")
    finally:
        sys.path.remove(EXAMPLES)


# --- the cluster, its REST API and the browser --------------------------------------------
@pytest.fixture(scope="module")
def chromium():
    """Skip the module, before any daemon starts, without Debian's chromium or Playwright."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing: run scripts/setup.sh (it installs Debian's "
                    "chromium for the UI's browser tests)")
    pytest.importorskip("playwright.sync_api",
                        reason="Playwright is missing: run scripts/setup.sh (the test extra)")
    return CHROMIUM


@pytest.fixture(scope="module")
def local(chromium, tmp_path_factory):
    """One LocalCluster with the UI and a logviewer for the module; every process it started
    (ZooKeeper, Redis, workers, the web servers) is stopped, and its directory removed."""
    from squall.deploy.local import LocalCluster

    lc = LocalCluster(CLUSTER_OVERRIDES, slots=SLOTS,
                      base_dir=str(tmp_path_factory.mktemp("ui-local")), web=True,
                      worker_stdout=subprocess.DEVNULL)
    try:
        lc.start()
        yield lc
    finally:
        lc.close("ui browser tests done")
        lc.cleanup()


class Rest:
    """The UI's REST API over urllib, with the token of the login URL as a Bearer token."""

    def __init__(self, lc):
        login = lc.ui.login_url()
        self.base = lc.ui.url
        self.token = parse_qs(urlsplit(login).query)["token"][0]

    def get(self, path: str) -> tuple[int, dict]:
        req = urllib.request.Request(self.base + path,
                                     headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(req, timeout=15) as resp:
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as e:
            with e:
                return e.code, json.load(e)

    def topology(self, tid: str) -> dict | None:
        """/api/v1/topology/<id>, or None once it answers 404."""
        status, body = self.get(f"/api/v1/topology/{quote(tid, safe='')}")
        if status == 404:
            return None
        assert status == 200, (status, body)
        return body


@pytest.fixture(scope="module")
def rest(local):
    return Rest(local)


@pytest.fixture
def page(chromium, tmp_path):
    """A page of a fresh headless Chromium (its own profile in tmp_path); uncaught errors of
    the page's JavaScript are collected in ``page.js_errors``."""
    from playwright.sync_api import sync_playwright

    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(profile), executable_path=chromium, headless=True, viewport=VIEWPORT,
            args=CHROMIUM_ARGS)
        try:
            ctx.set_default_timeout(UI_TIMEOUT_MS)
            pg = ctx.pages[0] if ctx.pages else ctx.new_page()
            pg.js_errors = []
            pg.on("pageerror", lambda exc: pg.js_errors.append(str(exc)))
            yield pg
        finally:
            ctx.close()


def topology_ids(lc) -> dict[str, str]:
    """Live topologies as {id: status}, from Nimbus."""
    with lc.client() as nimbus:
        return {t.id: t.status for t in nimbus.list().topologies}


def kill_and_wait(lc, name: str, tid: str, timeout: float = 30.0) -> None:
    """Kill ``name`` with no wait and wait (bounded) until Nimbus no longer lists it."""
    with lc.client() as nimbus:
        if tid in {t.id for t in nimbus.list().topologies}:
            nimbus.kill(name, wait_secs=0)
    poll_for(lambda: tid not in topology_ids(lc), timeout=timeout, interval=0.2,
             what=f"topology {tid} to be removed")


@contextlib.contextmanager
def running(lc, name, topology, conf):
    """Submit from the examples folder; kill (wait 0) at the end, whatever happened."""
    tid = lc.submit(name, topology, conf, EXAMPLES)
    try:
        yield tid
    finally:
        kill_and_wait(lc, name, tid)


def open_ui(page, lc, hash_route: str = "#/") -> None:
    """Open the login URL with ``hash_route`` on it: the server turns the token into a cookie
    and redirects to "/", and the browser keeps the fragment, so the page's first route is
    ``hash_route``. (Going to "/" first and then changing the hash would race the page's
    refresh of the cluster view: see ``texts_are``.)"""
    page.goto(lc.ui.login_url() + hash_route)
    assert "token=" not in page.url, page.url  # the token left the address bar
    assert page.url.endswith(hash_route), page.url


#: The sorted texts of ``selector`` equal ``expected`` (JS predicate for wait_for_function).
SORTED_TEXTS = """([sel, expected]) => JSON.stringify([...document.querySelectorAll(sel)]
    .map((e) => e.textContent.trim()).sort()) === JSON.stringify(expected)"""


def texts_are(page, selector: str, expected: list[str]) -> None:
    """Wait until the elements of ``selector`` show ``expected`` (in any order). Waiting,
    not reading once: the page re-renders every POLL_MS, and a refresh started before a
    route change can still paint the previous view over the new one for a moment."""
    page.wait_for_function(SORTED_TEXTS, arg=[selector, sorted(expected)])


# --- what every page must be --------------------------------------------------------------
#: Elements wider than the page or reaching past its edges (none on a page that fits).
OVERFLOWING = """() => {
  const W = document.documentElement.clientWidth, out = [];
  if (document.documentElement.scrollWidth > W)
    out.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} > ${W}`);
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if (!r.width && !r.height) continue;
    if (r.left < -0.5 || r.right > W + 0.5) {
      const cls = typeof el.className === "string" ? el.className : el.className.baseVal;
      out.push(`${el.tagName.toLowerCase()}${el.id ? "#" + el.id : ""}${cls ? "." + cls : ""} ` +
               `spans ${Math.round(r.left)}..${Math.round(r.right)} of ${W}`);
    }
  }
  return out.slice(0, 10);
}"""


def assert_fits(page) -> None:
    assert page.evaluate(OVERFLOWING) == []


def screenshot(page, name: str) -> str:
    shot = os.path.join(artifacts_dir(), name)
    page.screenshot(path=shot, full_page=True)
    assert os.path.getsize(shot) > 10_000
    return shot


def uptime_secs(text: str) -> int:
    """Storm's "1d 2h 3m 4s" -> seconds."""
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([dhms])", text))


def refreshes(page) -> int:
    """How many refreshes the page has painted (app.js counts them on #updated)."""
    return int(page.get_attribute("#updated", "data-refreshes") or 0)


#: The chart of a component once it has ``n`` rates: [rates, the counts' seconds between
#: them, polls so far, x tick labels, the units, the time window's label, points drawn].
CHART_READ = """([sel, n]) => { const c = document.querySelector(sel);
  if (!c || !(Number(c.dataset.points) >= n)) return null;
  const svg = c.querySelector("svg");
  return [JSON.parse(c.dataset.rates), JSON.parse(c.dataset.dts),
          Number(document.querySelector("#updated").dataset.refreshes),
          [...svg.querySelectorAll(".x-axis text:not(.title)")].map((e) => e.textContent),
          [...svg.querySelectorAll("text.unit")].map((e) => e.textContent),
          svg.querySelector(".x-axis text.title").textContent,
          svg.querySelectorAll("circle.pt").length]; }"""


# --- 1. the cluster page and the word count's page ------------------------------------------
def test_word_count_pages_charts_on_the_reports_cadence_and_fit(local, rest, page):
    wc = word_count_example()
    conf = dict(wc.CONF, **{"wordcount.sentences": 0, "topology.workers": 2})
    with running(local, wc.NAME, wc.topology().create_topology(), conf) as tid:
        requested = []
        page.on("request", lambda r: requested.append(r.url))
        open_ui(page, local)
        row = page.locator("#topologies tbody tr", has_text=tid)
        row.wait_for()
        assert wc.NAME in row.inner_text()
        poll_for(lambda: any(s["acked"] for s in (rest.topology(tid) or {}).get("spouts", [])),
                 timeout=STARTUP_SECS, interval=0.5, what=f"{tid}'s spout acking")

        row.get_by_role("link", name=wc.NAME, exact=True).click()
        page.wait_for_url(re.compile(rf"#/topology/{re.escape(quote(tid, safe=''))}$"))
        texts_are(page, "#spouts tbody tr td:first-child", ["sentences"])
        texts_are(page, "#bolts tbody tr td:first-child", ["split", "count", "report"])
        # The graph (drawn after the tables, from /visualization): the 4 user components,
        # no acker.
        texts_are(page, "#graph svg g.node[data-component] > text:first-of-type",
                  ["sentences", "split", "count", "report"])
        nodes = page.eval_on_selector_all("#graph svg g.node",
                                          "els => els.map((e) => e.dataset.component)")
        assert sorted(nodes) == ["count", "report", "sentences", "split"]

        # The spout's chart: a point per report of the counters (every REPORT_SECS), though
        # the page polls every POLL_SECS; so none is a zero while the spout acks all along.
        polls0 = refreshes(page)
        rates, dts, polls, xticks, units, window, circles = page.wait_for_function(
            CHART_READ, arg=['div.chart[data-component="sentences"]', CHART_POINTS],
            timeout=CHART_TIMEOUT_MS).json_value()
        assert len(rates) >= CHART_POINTS and all(r > 0 for r in rates), rates
        assert circles == len(rates)
        # Rates over the counts' own intervals: a report's, longer than a poll's.
        assert statistics.median(dts) > POLL_SECS, (dts, POLL_SECS)
        assert polls - polls0 >= len(rates) - 1  # the page polled all along
        assert units == ["acked/s", "latency ms"] and "now" in xticks and len(xticks) >= 3
        assert window.startswith("last "), window
        assert_fits(page)
        shot = screenshot(page, "ui-topology.png")
        print(f"\nscreenshot of the topology page: {shot} (spout chart: {rates} acked/s, "
              f"{dts} s apart, over {polls - polls0} polls; {window})")

        # Back on the cluster page: the supervisor's uptime is now's, not the one it
        # registered with, so two refreshes show two values.
        page.click("header a.brand")
        cell = "#supervisors tbody tr td:nth-child(6)"
        page.wait_for_selector(cell)
        first = page.inner_text(cell).strip()
        page.wait_for_function("([sel, t]) => { const m = document.querySelector(sel); return m && "
                               "m.textContent.trim() !== t; }", arg=[cell, first])
        assert uptime_secs(page.inner_text(cell)) > uptime_secs(first)
        page.locator("#topologies tbody tr", has_text=tid).wait_for()
        assert_fits(page)
        print(f"screenshot of the cluster page: {screenshot(page, 'ui-cluster.png')}")
        # The icon is in the page: no request for one, and none leaves the UI's origin.
        assert page.get_attribute("link[rel=icon]", "href").startswith("data:image/svg+xml,")
        assert not [u for u in requested if "favicon" in u or not u.startswith(local.ui.url)]
        assert page.js_errors == []


# --- 2. Kill with a wait -------------------------------------------------------------------
def small_topology():
    wc = word_count_example()
    b = TopologyBuilder()
    b.set_spout("sentences", wc.SentenceSpout(), 1)
    b.set_bolt("split", wc.SplitSentence(), 1).shuffle_grouping("sentences")
    return b.create_topology()


def test_kill_button_with_a_wait_removes_the_topology_after_the_wait(local, rest, page):
    name, wait = "ui-kill-me", 2
    conf = {"wordcount.sentences": 0, "topology.workers": 1, "topology.max.spout.pending": 500}
    tid = local.submit(name, small_topology(), conf, EXAMPLES)
    try:
        open_ui(page, local, f"#/topology/{quote(tid, safe='')}")
        page.locator("#bolts tbody tr", has_text="split").wait_for()
        page.click("#btn-kill")
        page.locator("#dialog").wait_for(state="visible")
        assert page.inner_text("#dialog-title") == f"Kill {name}?"
        page.fill("#field-wait", str(wait))
        clicked = time.monotonic()
        page.click("#dialog-ok")
        page.locator("#dialog").wait_for(state="hidden")
        page.locator("#toast", has_text=f"Kill {name}: done").wait_for()

        # KILLED at once (the spouts stop), removed only after the wait.
        poll_for(lambda: (rest.topology(tid) or {}).get("status") == "KILLED",
                 timeout=wait + 5, interval=0.1, what=f"{tid} KILLED in the REST API")
        assert topology_ids(local).get(tid) == "KILLED"
        poll_for(lambda: rest.topology(tid) is None and tid not in topology_ids(local),
                 timeout=wait + 20, interval=0.2, what=f"{tid} removed after the kill")
        gone_after = time.monotonic() - clicked
        assert gone_after >= wait - 0.5, \
            f"removed {gone_after:.2f} s after Kill: the wait of {wait} s was not honoured"
        # The open page notices on its next refresh.
        page.locator("#main", has_text=f"no live topology with id '{tid}'").wait_for()
        assert page.js_errors == []
    finally:
        if tid in topology_ids(local):
            kill_and_wait(local, name, tid)


def test_profiling_buttons_and_the_debug_toggle_on_a_component_page(local, rest, page):
    """Thread dump and CPU profile buttons: each file is listed on the page, with a link to
    the logviewer that serves it; the Debug toggle samples the component's emits."""
    name = "ui-profile-me"
    conf = {"wordcount.sentences": 0, "topology.workers": 1, "topology.max.spout.pending": 500,
            "topology.stats.freq.secs": 0.5}
    tid = local.submit(name, small_topology(), conf, EXAMPLES)
    try:
        open_ui(page, local, f"#/topology/{quote(tid, safe='')}/component/split")
        page.locator("#profiling tbody tr button[data-prof='threads']").wait_for(
            timeout=STARTUP_SECS * 1000)
        page.click("#profiling button[data-prof='threads']")
        page.locator("#toast", has_text="threads of ").wait_for()
        page.locator("#profiling .dumps a", has_text="threads").wait_for()
        page.click("#profiling button[data-prof='cpu']")
        page.locator("#dialog").wait_for(state="visible")
        page.fill("#field-secs", "2")
        page.click("#dialog-ok")
        page.locator("#profiling .dumps a", has_text="cpu").first.wait_for()
        page.locator("#profiling button[data-prof='cpu']", has_text="CPU profile (2 s)").wait_for()
        page.click("#btn-debug")
        page.fill("#field-pct", "100")
        page.click("#dialog-ok")
        page.locator("#toast", has_text="Debug split: 100% sampled").wait_for()
        page.locator("#btn-debug", has_text="Debug split: 100%").wait_for()
        assert page.js_errors == []
        assert_fits(page)
        shot = screenshot(page, "ui-profiling.png")
        # The flame graph itself, through the page's link (signed: another origin's cookie).
        svg_link = page.get_attribute("#profiling .dumps a[title$='.svg']", "href")
        other = page.context.new_page()
        try:
            other.goto(svg_link)
            assert_sampled_throughout(other.content())
            assert other.locator("svg rect[data-name*='word_count.py']").count() > 0
            other.screenshot(path=os.path.join(artifacts_dir(), "ui-flamegraph.png"))
        finally:
            other.close()
        print(f"\nscreenshots: {shot}, ui-flamegraph.png")
    finally:
        kill_and_wait(local, name, tid)


# --- 3. page-load time with ~50 executors (measured, not asserted) -------------------------
#: Records when #bolts first appears, in performance.now() of the navigation.
BOLTS_OBSERVER = """
(() => {
  const seen = () => { if (document.querySelector('#bolts tbody tr') && !window.__boltsAt) {
    window.__boltsAt = performance.now(); } };
  new MutationObserver(seen).observe(document, {childList: true, subtree: true});
})();
"""


def wide_word_count(wc):
    """The example's components with more parallelism: 5 + 20 + 20 + 1 executors, plus the
    ackers the conf asks for."""
    b = TopologyBuilder()
    b.set_spout("sentences", wc.SentenceSpout(), 5)
    b.set_bolt("split", wc.SplitSentence(), 20).shuffle_grouping("sentences")
    b.set_bolt("count", wc.WordCount(), 20).fields_grouping("split", ["word"])
    b.set_bolt("report", wc.Report(), 1).global_grouping("count", "increments")
    return b.create_topology()


def test_page_load_time_with_50_executors(local, rest, page):
    wc = word_count_example()
    name, runs = "ui-word-count-50", 5
    conf = dict(wc.CONF, **{"wordcount.sentences": 0, "topology.workers": 2,
                            "topology.acker.executors": 4})
    with running(local, name, wide_word_count(wc), conf) as tid:
        def live():
            t = rest.topology(tid)
            return t if t and t["executorsTotal"] >= 45 and t["workersTotal"] == 2 and \
                any(s["acked"] for s in t["spouts"]) else None
        t = poll_for(live, timeout=STARTUP_SECS, interval=0.5,
                     what=f"{tid} running with >= 45 executors on 2 workers")
        executors = t["executorsTotal"]

        open_ui(page, local)
        page.add_init_script(BOLTS_OBSERVER)
        url = f"{local.ui.url}/#/topology/{quote(tid, safe='')}"
        wall, in_page = [], []
        for _ in range(runs):
            page.goto("about:blank")
            t0 = time.perf_counter()
            page.goto(url)
            page.wait_for_selector("#bolts tbody tr")
            wall.append((time.perf_counter() - t0) * 1000)
            in_page.append(page.wait_for_function("() => window.__boltsAt").json_value())
        rows = page.locator("#bolts tbody tr").count()
        assert rows == 3  # the page did render the topology, not an error

    result = {"topologyId": tid, "executors": executors, "workers": 2, "runs": runs,
              "wallMs": [round(x, 1) for x in wall],
              "inPageMs": [round(x, 1) for x in in_page],
              "medianWallMs": round(statistics.median(wall), 1),
              "medianInPageMs": round(statistics.median(in_page), 1),
              "measured": "navigation to #/topology/<id> until #bolts has rows: wall = "
                          "Python's clock around goto + wait; inPage = performance.now() "
                          "when a MutationObserver first saw the rows",
              "cpus": os.cpu_count(), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    path = os.path.join(artifacts_dir(), "ui-page-load.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
        fh.write("\n")
    print(f"\ntopology page with {executors} executors: median {result['medianWallMs']} ms "
          f"wall, {result['medianInPageMs']} ms in page (runs, wall: {result['wallMs']}); "
          f"written to {path}")


# --- 4. an unknown topology ----------------------------------------------------------------
def test_unknown_topology_shows_the_404_message(local, rest, page):
    status, body = rest.get("/api/v1/topology/nope-1-1")
    assert status == 404, body
    assert body["error"] == "Not Found"
    assert "no live topology" in body["errorMessage"] and "nope-1-1" in body["errorMessage"]

    open_ui(page, local, "#/topology/nope-1-1")
    page.locator("#main p", has_text=body["errorMessage"]).wait_for()
    page.locator("#main p a[href='#/']", has_text="Back to the cluster").wait_for()
    assert page.locator("#spouts").count() == 0
    assert page.js_errors == []


# --- 5. Kafka lag on the topology page -------------------------------------------------------
def test_topology_page_shows_kafka_lag_per_partition(local, rest, page, kafka_broker):
    """examples/kafka_word_count.py on the module's cluster and the session's broker: once
    every sentence is committed the spout is deactivated and 100 more are written, and the
    page's Kafka lag table shows them, partition by partition, as the broker counts them."""
    sys.path.insert(0, EXAMPLES)
    try:
        kwc = importlib.import_module("kafka_word_count")
    finally:
        sys.path.remove(EXAMPLES)
    bs = kafka_broker.bootstrap_servers
    for topic, partitions in kwc.KAFKA_TOPICS.items():
        with contextlib.suppress(Exception):  # a rerun in the same session finds them
            kafka_broker.create_topic(topic, partitions)
    conf = dict(kwc.CONF, **{cfg.KAFKA_BOOTSTRAP_SERVERS: bs, "wordcount.sentences": 2000,
                             "topology.workers": 1})
    kwc.setup(conf)
    with running(local, kwc.NAME, kwc.topology().create_topology(), conf) as tid:
        lag_path = f"/api/v1/topology/{quote(tid, safe='')}/lag"

        def total_lag():
            status, body = rest.get(lag_path)
            parts = body.get("sentences", {}).get("spoutLagResult", {}).get(kwc.SENTENCES, {})
            return sum(r["lag"] for r in parts.values()) if status == 200 and parts else None
        poll_for(lambda: total_lag() == 0, timeout=STARTUP_SECS, interval=0.5,
                 what="every sentence committed")
        with local.client() as nimbus:
            nimbus.deactivate(kwc.NAME)

        def deactivated():  # the spout's own word: it polls no more
            import glob
            for path in glob.glob(os.path.join(local.supervisor.files.logs_dir, "**",
                                               f"{tid}-*.log"), recursive=True):
                with open(path, errors="replace") as fh:
                    if any(" sentences:" in ln and "deactivated" in ln for ln in fh):
                        return True
            return False
        poll_for(deactivated, timeout=30, interval=0.2, what="the spout deactivated")
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": bs})
        for i in range(100):
            p.produce(kwc.SENTENCES, b"one more sentence", partition=i % 4)
        assert p.flush(30) == 0
        assert total_lag() == 100

        open_ui(page, local, f"#/topology/{quote(tid, safe='')}")
        page.wait_for_selector("#kafka-lag tbody tr")
        texts_are(page, "#kafka-lag tbody tr td:nth-child(3)", ["0", "1", "2", "3"])
        lags = page.eval_on_selector_all("#kafka-lag tbody tr td:nth-child(6)",
                                         "els => els.map((e) => Number(e.textContent))")
        assert lags == [25, 25, 25, 25]
        assert "total 100" in page.inner_text("#kafka-lag-box h2")
        # The counts of those 2000 sentences, which may be a report away.
        poll_for(lambda: (rest.topology(tid) or {"spouts": [{}]})["spouts"][0].get("acked", 0)
                 >= 2000, timeout=3 * REPORT_SECS, interval=0.5, what="the spout's acks in the UI")
        page.wait_for_function("() => Number((document.querySelector('#spouts tbody tr "
                               "td:nth-child(8)') || {textContent: '0'}).textContent"
                               ".replace(/,/g, '')) >= 2000")
        shot = os.path.join(artifacts_dir(), "ui-kafka-lag.png")
        page.locator("#kafka-lag-box").scroll_into_view_if_needed()
        page.screenshot(path=shot, full_page=True)
        assert os.path.getsize(shot) > 10_000
        print(f"\nscreenshot of the topology page with its Kafka lag: {shot}")
        assert page.js_errors == []


# --- 6. a Trident topology's page -------------------------------------------------------------
#: The error the Trident split reports on each task's first REPEATS sentences.
REPEATED_ERROR = "ValueError: sentence has no stop word list; split on spaces only"
REPEATS = 4


def trident_word_count(sentences: list[str]):
    """Storm's TridentWordCount over an endless spout (each batch: ``sentences``), its counts
    in memory; the split reports :data:`REPEATED_ERROR` on each task's first
    :data:`REPEATS` sentences. The classes are made here so that they are pickled by value:
    the workers need not import this module."""
    from squall.client.trident.operation import Count, Function
    from squall.client.trident.spout import Emitter, TridentSpout
    from squall.client.trident.state.factory import MemoryMapState
    from squall.client.trident.stream import TridentTopology

    class SentenceEmitter(Emitter):
        def emit_batch(self, attempt, metadata, collector):
            for s in sentences:
                collector.emit([s])

    class Sentences(TridentSpout):
        def get_emitter(self, tx_state_id, conf, context):
            return SentenceEmitter()

        def output_fields(self):
            return ["sentence"]

    class Split(Function):
        def __init__(self):
            self.seen = 0

        def execute(self, tup, collector):
            self.seen += 1
            if self.seen <= REPEATS:
                collector.report_error(REPEATED_ERROR)
            for w in tup[0].split():
                collector.emit([w])

    t = TridentTopology()
    (t.new_stream("sentences", Sentences())
      .each(["sentence"], Split(), ["word"]).parallelism_hint(2)
      .group_by(["word"])
      .persistent_aggregate(MemoryMapState.transactional("ui-counts"), Count(), ["count"])
      .parallelism_hint(2))
    return t.build()


#: Edge labels of the graph that cover another label or a node (none when it reads).
LABEL_OVERLAPS = """() => {
  const box = (e) => e.getBoundingClientRect();
  const labels = [...document.querySelectorAll("#graph g.edge-label rect")].map(box);
  const nodes = [...document.querySelectorAll("#graph g.node rect")].map(box);
  const hit = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 &&
                        a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
  const out = [];
  labels.forEach((a, i) => {
    labels.slice(i + 1).forEach((b, j) => { if (hit(a, b)) out.push(`label ${i} covers label ${i + j + 1}`); });
    nodes.forEach((n, j) => { if (hit(a, n)) out.push(`label ${i} covers node ${j}`); });
  });
  return [labels.length, out];
}"""


def test_trident_page_reads_its_graph_tables_and_errors(local, rest, page):
    wc = word_count_example()
    conf = {"topology.workers": 2, "topology.max.spout.pending": 2,
            "topology.trident.batch.emit.interval.millis": 200}
    topology = trident_word_count(wc.make_pool()[:20])
    with running(local, "ui-trident", topology, conf) as tid:
        def counted():
            t = rest.topology(tid)
            groups = [g for g in (t or {}).get("errorGroups", []) if g["error"] == REPEATED_ERROR]
            return (t, groups[0]) if groups and groups[0]["count"] >= REPEATS and \
                any(b["executed"] for b in t["bolts"]) else None
        t, group = poll_for(counted, timeout=STARTUP_SECS, interval=0.5,
                            what=f"{tid} running, its split's errors reported")
        raw = [e for e in t["errors"] if e["error"] == REPEATED_ERROR]
        assert group["count"] == len(raw) and {e["component"] for e in raw} == {group["component"]}
        assert group["lastTime"] == max(e["errorTime"] for e in raw)
        # Emitted counts the user's streams: the master coordinator sends only Trident's
        # batch coordination, which ?sys=true adds.
        master = [s for s in t["spouts"] if s["spoutId"].startswith("$mastercoord")]
        assert master and master[0]["emitted"] == 0

        def sys_emitted():
            # Each worker's counters reach Nimbus on their own clock (the supervisor's report
            # carries each one's last heartbeat): the bolts' executes can show before the
            # coordination that started them does.
            status, with_sys = rest.get(f"/api/v1/topology/{quote(tid, safe='')}?sys=true")
            assert status == 200
            return next(s for s in with_sys["spouts"]
                        if s["spoutId"] == master[0]["spoutId"])["emitted"] > 0
        poll_for(sys_emitted, timeout=3 * REPORT_SECS, interval=0.5,
                 what="the master coordinator's batch coordination counted with ?sys=true")

        open_ui(page, local, f"#/topology/{quote(tid, safe='')}")
        page.wait_for_selector("#graph svg g.edge-label")
        labels, overlaps = page.evaluate(LABEL_OVERLAPS)
        assert labels >= 5 and overlaps == [], overlaps
        # One row for the repeated error, with how many times (as the REST API counts them
        # now: another task's may still be arriving) and the last time.
        rows = page.locator("#errors tbody tr", has_text=REPEATED_ERROR)
        rows.first.wait_for()

        def row_agrees():
            cells = rows.first.locator("td").all_inner_texts()
            now = next(g for g in rest.topology(tid)["errorGroups"] if g["error"] == REPEATED_ERROR)
            return cells if cells[2] == str(now["count"]) else None
        cells = poll_for(row_agrees, timeout=5 * POLL_SECS, interval=POLL_SECS / 3,
                         what="the page's error count to be the REST API's")
        assert rows.count() == 1 and cells[1] == group["component"]
        bolt_chart = f'div.chart[data-component="{group["component"]}"]'
        rates = page.wait_for_function(
            "([sel, n]) => { const c = document.querySelector(sel); return c && "
            "Number(c.dataset.points) >= n ? JSON.parse(c.dataset.rates) : null; }",
            arg=[bolt_chart, CHART_POINTS], timeout=CHART_TIMEOUT_MS).json_value()
        assert all(r > 0 for r in rates), rates
        assert_fits(page)
        shot = screenshot(page, "ui-trident.png")
        print(f"\nscreenshot of the Trident topology page: {shot} ({labels} edge labels, "
              f"{cells[2]} x {REPEATED_ERROR!r} in one row)")
        assert page.js_errors == []
