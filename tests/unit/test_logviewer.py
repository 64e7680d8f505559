"""ui/logviewer.py: a host's logs by name over HTTP, and never a file outside the log roots."""

import os

import pytest
from squall.ui import logviewer
from squall.ui.logviewer import BadName, make_app, resolve

WORKER = "wc-1-1700000000-6700.log"
ROTATED = WORKER + ".1"
DAEMON = "supervisor.log"
LINES = ["starting worker", "emitted <script>alert(1)</script> & more", "needle one",
         "nothing here", "needle two"]


@pytest.fixture
def logs(tmp_path):
    """A log root with a worker log, its rotation and a daemon log, plus a secret outside it."""
    root = tmp_path / "logs"
    root.mkdir()
    (root / WORKER).write_text("\n".join(LINES) + "\n")
    (root / ROTATED).write_text("older line\n")
    (root / DAEMON).write_text("supervisor up\n")
    (root / "sub").mkdir()
    (root / "sub" / "x.log").write_text("in a subdirectory\n")
    (tmp_path / "secret.txt").write_text("root:x:0:0\n")
    return root


@pytest.fixture
def client(logs):
    return make_app([str(logs)]).test_client()


def get(client, url):
    """The response of a GET, read and closed (a download holds the file open until then)."""
    with client.get(url) as resp:
        resp.get_data()
        return resp


def test_index_lists_files_grouped_by_topology_and_daemons(client):
    page = get(client, "/").get_data(as_text=True)
    assert "wc-1-1700000000</th>" in page and "daemons</th>" in page
    assert page.index("daemons</th>") < page.index(DAEMON)
    assert page.index("wc-1-1700000000</th>") < page.index(WORKER)
    for name in (WORKER, ROTATED, DAEMON):
        assert f"/log?file={name}" in page and f"/download?file={name}" in page
    assert "x.log" not in page and "sub<" not in page  # only files directly in the root


def test_list_logs_groups_by_topology_id(logs):
    groups = logviewer.list_logs([str(logs), str(logs / "missing")])
    assert sorted(groups) == ["daemons", "wc-1-1700000000"]
    assert sorted(f[0] for f in groups["wc-1-1700000000"]) == [WORKER, ROTATED]
    assert [(f[0], f[1]) for f in groups["daemons"]] == [(DAEMON, len("supervisor up\n"))]


def test_an_empty_root_says_so(tmp_path):
    page = get(make_app([str(tmp_path)]).test_client(), "/").get_data(as_text=True)
    assert "No logs yet." in page


def test_log_page_shows_the_tail_escaped(client):
    resp = get(client, f"/log?file={WORKER}")
    assert resp.status_code == 200
    page = resp.get_data(as_text=True)
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in page
    assert "starting worker" in page and "needle two" in page


def test_log_page_search_marks_and_lists_matches(client):
    page = get(client, f"/log?file={WORKER}&q=needle").get_data(as_text=True)
    assert "<h3>Matches</h3>" in page
    assert "<mark>needle</mark> one" in page
    assert "<td class=muted>3</td><td>needle one</td>" in page
    assert "<td class=muted>5</td><td>needle two</td>" in page
    page = get(client, f"/log?file={WORKER}&q=<script>").get_data(as_text=True)
    assert "<script>" not in page and "<mark>&lt;script&gt;</mark>" in page
    assert "No match." in get(client, f"/log?file={WORKER}&q=absent").get_data(as_text=True)


def test_raw_api_returns_a_byte_range_and_the_size(client, logs):
    data = (logs / WORKER).read_bytes()
    resp = get(client, f"/api/v1/log?file={WORKER}&start=0&length=5")
    assert resp.status_code == 200 and resp.get_data() == data[:5]
    assert resp.headers["X-Log-Size"] == str(len(data))
    assert resp.headers["X-Log-Start"] == "0"
    resp = get(client, f"/api/v1/log?file={WORKER}&start=9&length=6")
    assert resp.get_data() == data[9:15] and resp.headers["X-Log-Start"] == "9"
    past = get(client, f"/api/v1/log?file={WORKER}&start={len(data) + 100}&length=5")
    assert past.status_code == 200 and past.get_data() == b""


def test_raw_api_defaults_to_the_tail(client, logs, monkeypatch):
    data = (logs / WORKER).read_bytes()
    assert get(client, f"/api/v1/log?file={WORKER}").get_data() == data  # smaller than a tail
    monkeypatch.setattr(logviewer, "TAIL_BYTES", 10)
    resp = get(make_app([str(logs)]).test_client(), f"/api/v1/log?file={WORKER}")
    assert resp.get_data() == data[-10:]
    assert resp.headers["X-Log-Start"] == str(len(data) - 10)
    resp = get(client, f"/api/v1/log?file={WORKER}&length=4")
    assert resp.get_data() == data[-4:]


def test_raw_api_refuses_a_non_numeric_range(client):
    for query in ("start=abc", "start=0&length=lots", "start=1.5"):
        resp = get(client, f"/api/v1/log?file={WORKER}&{query}")
        assert resp.status_code == 400, query
        assert "whole numbers" in resp.get_json()["errorMessage"]


def test_search_returns_matching_lines_with_numbers(client, logs):
    resp = get(client, f"/search?file={WORKER}&q=needle")
    assert resp.status_code == 200
    body = resp.get_json()
    assert body["file"] == WORKER
    assert [(m["line"], m["text"]) for m in body["matches"]] == [(3, "needle one"),
                                                                 (5, "needle two")]
    data = (logs / WORKER).read_bytes()
    assert [m["offset"] for m in body["matches"]] == [data.index(b"needle one"),
                                                      data.index(b"needle two")]
    assert get(client, f"/search?file={WORKER}&q=").get_json()["matches"] == []
    assert get(client, f"/search?file={WORKER}&q=NEEDLE").get_json()["matches"] == []


def test_search_stops_at_max_matches(tmp_path, monkeypatch):
    (tmp_path / "big.log").write_text("hit\n" * 10)
    monkeypatch.setattr(logviewer, "MAX_MATCHES", 3)
    found = logviewer.search(str(tmp_path / "big.log"), "hit")
    assert [m["line"] for m in found] == [1, 2, 3]


def test_download_returns_the_whole_file_as_an_attachment(client, logs):
    resp = get(client, f"/download?file={WORKER}")
    assert resp.status_code == 200
    assert resp.get_data() == (logs / WORKER).read_bytes()
    assert resp.headers["Content-Disposition"] == f"attachment; filename={WORKER}"
    assert resp.mimetype == "text/plain"


REFUSED = ["../etc/passwd", "..", ".", "/etc/passwd", "sub/x.log", "a\0b.log", "..\\x.log",
           "..%2F..%2Fetc%2Fpasswd"]


@pytest.mark.parametrize("endpoint", ["/log", "/api/v1/log", "/search", "/download"])
@pytest.mark.parametrize("name", REFUSED)
def test_a_path_instead_of_a_name_is_refused(client, endpoint, name):
    # names go into the URL percent-encoded, as a browser would send them; the last one is
    # already encoded, so the server sees "../../etc/passwd"
    encoded = name if "%" in name else name.replace("\0", "%00").replace("/", "%2F")
    resp = get(client, f"{endpoint}?file={encoded}&q=x")
    assert resp.status_code == 400
    assert resp.headers["Content-Type"] == "application/json"
    assert "errorMessage" in resp.get_json() and "root:x" not in resp.get_data(as_text=True)


@pytest.mark.parametrize("endpoint", ["/log", "/api/v1/log", "/search", "/download"])
def test_an_unknown_name_is_404_and_no_name_is_400(client, endpoint):
    resp = get(client, f"{endpoint}?file=nope.log")
    assert resp.status_code == 404 and "nope.log" in resp.get_json()["errorMessage"]
    assert get(client, f"{endpoint}?file=sub").status_code == 404  # a directory
    for query in ("", "?file="):
        resp = get(client, endpoint + query)
        assert resp.status_code == 400 and "errorMessage" in resp.get_json()


def test_a_symlink_out_of_the_root_is_refused_and_not_listed(client, logs, tmp_path):
    os.symlink(tmp_path / "secret.txt", logs / "evil.log")
    os.symlink("/etc", logs / "etc.log")
    for name in ("evil.log", "etc.log"):
        for endpoint in ("/log", "/api/v1/log", "/search", "/download"):
            resp = get(client, f"{endpoint}?file={name}&q=root")
            assert resp.status_code == 400, (endpoint, name)
            assert "outside the log directory" in resp.get_json()["errorMessage"]
            assert "root:x" not in resp.get_data(as_text=True)
    page = get(client, "/").get_data(as_text=True)
    assert "evil.log" not in page and "etc.log" not in page and WORKER in page


def test_a_hard_link_into_the_root_is_refused_and_not_listed(client, logs, tmp_path):
    """A key hard-linked into a log directory (by anyone who can write there) was served."""
    os.link(tmp_path / "secret.txt", logs / "key.log")
    for endpoint in ("/log", "/api/v1/log", "/search", "/download"):
        resp = get(client, f"{endpoint}?file=key.log&q=root")
        assert resp.status_code == 400, endpoint
        assert "other hard links" in resp.get_json()["errorMessage"]
        assert "root:x" not in resp.get_data(as_text=True)
    assert "key.log" not in get(client, "/").get_data(as_text=True)


def test_a_symlink_inside_the_root_is_served(client, logs):
    os.symlink(WORKER, logs / "latest.log")
    resp = get(client, "/api/v1/log?file=latest.log&start=0&length=15")
    assert resp.status_code == 200 and resp.get_data() == b"starting worker"
    assert "latest.log" in get(client, "/").get_data(as_text=True)


# --- resolve ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [n for n in REFUSED if "%" not in n] + ["", "...", "..x"])
def test_resolve_refuses_anything_but_a_plain_name(logs, name):
    with pytest.raises(BadName):
        resolve([str(logs)], name)


def test_resolve_finds_names_and_refuses_symlinks_out(logs, tmp_path):
    roots = [str(logs)]
    assert resolve(roots, WORKER) == os.path.realpath(logs / WORKER)
    assert resolve(roots, "nope.log") is None
    assert resolve(roots, "sub") is None  # a directory is not a log
    os.symlink(tmp_path / "secret.txt", logs / "evil.log")
    with pytest.raises(BadName, match="outside the log directory"):
        resolve(roots, "evil.log")
    os.symlink(logs / "sub" / "x.log", logs / "deep.log")
    with pytest.raises(BadName):
        resolve(roots, "deep.log")  # inside the root, but not directly in it
    os.symlink(logs / DAEMON, logs / "daemon-link.log")
    assert resolve(roots, "daemon-link.log") == os.path.realpath(logs / DAEMON)


def test_resolve_searches_every_root_in_order(tmp_path, logs):
    second = tmp_path / "second"
    second.mkdir()
    (second / "nimbus.log").write_text("nimbus up\n")
    (second / DAEMON).write_text("another supervisor\n")
    roots = [str(logs), str(tmp_path / "missing"), str(second)]
    assert resolve(roots, "nimbus.log") == os.path.realpath(second / "nimbus.log")
    assert resolve(roots, DAEMON) == os.path.realpath(logs / DAEMON)  # the first root wins
    assert resolve(roots, "absent.log") is None
    resp = get(make_app(roots).test_client(), "/download?file=nimbus.log")
    assert resp.status_code == 200 and resp.get_data() == b"nimbus up\n"


def test_resolve_works_with_a_relative_or_symlinked_root(tmp_path, logs, monkeypatch):
    os.symlink(logs, tmp_path / "link-to-logs")
    assert resolve([str(tmp_path / "link-to-logs")], WORKER) == os.path.realpath(logs / WORKER)
    monkeypatch.chdir(tmp_path)
    assert resolve(["logs/"], WORKER) == os.path.realpath(logs / WORKER)


def test_a_file_swapped_for_a_symlink_after_the_check_is_refused(tmp_path):
    """resolve() looked at a plain file; by the time it is opened it is a symlink out of the
    log directory: open_log refuses it instead of following it."""
    from squall.ui.logviewer import open_log

    root = tmp_path / "logs"
    root.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("do not show")
    log = root / "wc-1-1-6700.log"
    log.write_text("fine\n")
    path = resolve([str(root)], log.name)
    log.unlink()
    log.symlink_to(secret)
    with pytest.raises(BadName, match="cannot be opened"):
        open_log(path)


def test_search_reads_a_huge_line_in_bounded_pieces(tmp_path):
    from squall.ui import logviewer

    root = tmp_path / "logs"
    root.mkdir()
    (root / "big.log").write_bytes(b"x" * (3 * logviewer.MAX_LINE) + b"needle\nnext needle\n")
    found = logviewer.search(str(root / "big.log"), "needle")
    assert [m["text"] for m in found][-1] == "next needle"
    assert all(len(m["text"]) <= logviewer.MAX_LINE for m in found)


# --- a worker's dumps and events (squall profile, squall debug: client/profiling.py) ------
SVG_DUMP = "wc-1-1700000000-6700.cpu-20250101-120000-a1b2c3.svg"
THREADS = "wc-1-1700000000-6700.threads-20250101-120001-a1b2c4.txt"
EVENTS = "wc-1-1700000000-6700.events.log"
OTHER = "wc-1-1700000000-6701.threads-20250101-120002-a1b2c5.txt"


@pytest.fixture
def dumps(logs):
    from squall.client.profiling import format_event
    (logs / SVG_DUMP).write_text('<svg xmlns="http://www.w3.org/2000/svg"><rect/></svg>')
    (logs / THREADS).write_text('"MainThread"\n')
    (logs / OTHER).write_text("another worker\n")
    (logs / EVENTS).write_text(
        format_event(1700000000.5, "split", 3, "default", None, ["<b>the cow</b>"]) +
        format_event(1700000001.5, "sentences", 1, "default", 7,
                     ['"component":"split"']) +
        "not an event\n" +
        format_event(1700000002.5, "split", 4, "default", None, ["jumped"]))
    return logs


def test_a_workers_page_lists_its_logs_dumps_and_events(client, dumps):
    page = get(client, "/dumps/wc-1-1700000000/127.0.0.1:6700").get_data(as_text=True)
    assert WORKER in page and SVG_DUMP in page and THREADS in page and EVENTS in page
    assert OTHER not in page and DAEMON not in page
    assert f"/dump?file={SVG_DUMP}" in page and f"/events?file={EVENTS}" in page
    listing = client.get("/api/v1/dumps/wc-1-1700000000/127.0.0.1:6700").get_json()
    kinds = {f["name"]: (f["kind"], f["link"]) for f in listing["files"]}
    assert kinds[SVG_DUMP] == ("cpu", f"/dump?file={SVG_DUMP}")
    assert kinds[EVENTS] == ("events", f"/events?file={EVENTS}")
    assert kinds[WORKER] == ("log", f"/log?file={WORKER}")
    assert OTHER not in kinds
    assert get(client, "/dumps/wc-1-1700000000/6700").status_code == 400
    # Grouped with their topology on the index.
    index = get(client, "/").get_data(as_text=True)
    assert index.index("daemons</th>") < index.index("wc-1-1700000000</th>") < index.index(SVG_DUMP)


def test_a_dump_is_shown_with_no_script_and_only_dumps(client, dumps):
    resp = get(client, f"/dump?file={SVG_DUMP}")
    assert resp.status_code == 200 and resp.mimetype == "image/svg+xml"
    assert resp.headers["Content-Security-Policy"] == logviewer.SVG_POLICY
    assert "script" not in logviewer.SVG_POLICY and resp.headers["X-Content-Type-Options"] == \
        "nosniff"
    assert get(client, f"/dump?file={THREADS}").mimetype == "text/plain"
    assert get(client, f"/dump?file={WORKER}").status_code == 400
    assert get(client, "/dump?file=..%2Fsecret.txt").status_code == 400
    assert get(client, f"/events?file={WORKER}").status_code == 400


def test_the_events_page_shows_events_newest_last_searched_and_escaped(client, dumps):
    page = get(client, f"/events?file={EVENTS}").get_data(as_text=True)
    assert "3 events, newest last" in page
    assert page.index("the cow") < page.index("jumped")
    assert "<b>the cow" not in page and "&lt;b&gt;the cow&lt;/b&gt;" in page
    assert "2023-11-14 22:13:20.500Z" in page
    page = get(client, f"/events?file={EVENTS}&q=jumped").get_data(as_text=True)
    assert "1 events" in page and "the cow" not in page
    # The component filter matches the field, not a value that spells it.
    page = get(client, f"/events?file={EVENTS}&component=split").get_data(as_text=True)
    assert "2 events" in page and "sentences" not in page.split("<table")[1]
    assert "No events." in get(client, f"/events?file={EVENTS}&q=nothing").get_data(
        as_text=True)
