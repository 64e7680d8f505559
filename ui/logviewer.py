"""``squall logviewer``: this host's worker and daemon logs over HTTP (Storm's logviewer).

Serves the files directly inside the log roots (a supervisor's ``<storm.local.dir>/logs``:
``<topology id>-<port>.log`` and its rotations ``.1`` ... ``.N``, and daemon logs):

* ``/``                      the files, grouped by topology;
* ``/log?file=F``            a page with the file's tail and a search box;
* ``/api/v1/log?file=F&start=S&length=L``  raw bytes (Storm's endpoint; default: the tail);
* ``/search?file=F&q=TEXT``  matching lines as JSON (bounded);
* ``/download?file=F``       the whole file;
* ``/dumps/<topology id>/<host:port>``  a worker's page: its logs, its profiler dumps (thread
  dumps, memory snapshots, CPU flame graphs: client/profiling.py) and its events log
  (Storm's dumps listing); ``/api/v1/dumps/<topology id>/<host:port>`` the same as JSON;
* ``/dump?file=F``           a dump shown in the browser (a flame graph as SVG, under a
  policy that runs no script);
* ``/events?file=F&q=TEXT&component=C``  the events of ``squall debug`` (Storm's event
  inspector): the newest, or those matching, newest last.

A file is named, never pathed: a name with a separator, ``..`` or a NUL is refused (400),
and a name whose real path (symlinks resolved) leaves its root is refused too, so a
symlink in the log directory cannot expose ``/etc/passwd``.
"""

from __future__ import annotations

import html
import json
import os
import stat
import time
from typing import Iterable
from urllib.parse import quote

from flask import Flask, Response, jsonify, request, send_file

from ..client.contract import WORKER_LOG
from ..client.profiling import WORKER_ARTIFACT, parse_event, worker_prefix
from .rest import json_error

#: Bytes of a file shown by default on its page (Storm shows the last page of 51200).
TAIL_BYTES = 64 * 1024
#: The most bytes /api/v1/log returns at once.
MAX_LENGTH = 1024 * 1024
#: Search: lines returned, bytes scanned, and bytes of one line read at once, at most.
MAX_MATCHES = 200
MAX_SCAN = 64 * 1024 * 1024
MAX_LINE = 64 * 1024
#: Events shown on an events page (the newest, or the newest matches), and the bytes of the
#: file's tail read for them when there is no search.
MAX_EVENTS = 500
EVENTS_TAIL = 2 * 1024 * 1024
#: A flame graph comes from the profiled code's names: shown with no script, no fetch.
SVG_POLICY = "default-src 'none'; style-src 'unsafe-inline'"


class BadName(ValueError):
    """A file name that is not a plain name inside a log root."""


def resolve(roots: Iterable[str], name: str) -> str | None:
    """The real path of log ``name`` in one of ``roots``; None when there is no such file;
    BadName when ``name`` tries to leave them."""
    if not name or "/" in name or "\\" in name or "\0" in name or name in (".", "..") or \
            name.startswith(".."):
        raise BadName(f"{name!r} is not a log file name: use a name from the list, without "
                      "a path")
    for root in roots:
        real_root = os.path.realpath(root)
        path = os.path.realpath(os.path.join(real_root, name))
        if os.path.dirname(path) != real_root:
            raise BadName(f"{name!r} leads outside the log directory (a symlink?); refused")
        if os.path.isfile(path):
            return path
    return None


def list_logs(roots: Iterable[str]) -> dict[str, list[tuple[str, int, float]]]:
    """topology id (or "daemons") -> [(name, size, mtime)], newest first."""
    out: dict[str, list[tuple[str, int, float]]] = {}
    for root in roots:
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for name in names:
            try:
                path = resolve([root], name)
            except BadName:
                continue  # a symlink out of the root: not listed either
            if path is None:
                continue
            try:
                st = os.stat(path)
            except OSError:  # rotated away since the listing
                continue
            if st.st_nlink > 1:
                continue  # refused by open_log: not listed either
            m = WORKER_LOG.match(name) or WORKER_ARTIFACT.match(name)
            out.setdefault(m.group("tid") if m else "daemons", []).append(
                (name, st.st_size, st.st_mtime))
    for files in out.values():
        files.sort(key=lambda f: -f[2])
    return dict(sorted(out.items()))


def open_log(path: str):
    """The resolved file, opened without following a symlink and checked to be a regular
    file: one swapped in after :func:`resolve` looked is refused, not followed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise BadName(f"{os.path.basename(path)!r} cannot be opened ({e.strerror})") from None
    fh = os.fdopen(fd, "rb")
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        fh.close()
        raise BadName(f"{os.path.basename(path)!r} is not a regular file")
    if st.st_nlink > 1:
        # A hard link made into the log directory is another file's contents (a key);
        # logs are written and rotated by renames, never hard-linked.
        fh.close()
        raise BadName(f"{os.path.basename(path)!r} has other hard links (another file's "
                      "contents); refused")
    return fh


def read_range(path: str, start: int | None, length: int) -> tuple[bytes, int, int]:
    """(bytes, start, file size): ``length`` bytes from ``start``, or the tail when None."""
    length = max(0, min(length, MAX_LENGTH))
    with open_log(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if start is None:
            start = max(0, size - length)
        start = max(0, min(start, size))
        fh.seek(start)
        return fh.read(length), start, size


def search(path: str, needle: str) -> list[dict]:
    """Lines containing ``needle`` (bytes compared, case-sensitive), first MAX_MATCHES."""
    if not needle:
        return []
    key = needle.encode("utf-8", "replace")
    out = []
    offset = 0
    with open_log(path) as fh:
        lineno = 0
        # Bounded reads: a "line" of a gigabyte is taken in MAX_LINE pieces.
        for line in iter(lambda: fh.readline(MAX_LINE), b""):
            lineno += 1
            if key in line:
                out.append({"line": lineno, "offset": offset,
                            "text": line.decode("utf-8", "replace").rstrip("\n")})
                if len(out) >= MAX_MATCHES:
                    break
            offset += len(line)
            if offset > MAX_SCAN:
                break
    return out


def worker_files(roots: Iterable[str], topology_id: str, port: int
                 ) -> list[tuple[str, int, float]]:
    """(name, size, mtime) of the logs, dumps and events logs of one worker, newest first."""
    prefix = worker_prefix(topology_id, port)
    log = f"{topology_id}-{port}.log"
    return [f for f in list_logs(roots).get(topology_id, [])
            if f[0].startswith(prefix) or f[0] == log or f[0].startswith(log + ".")]


def kind_of(name: str) -> str:
    """"log", "events", or a dump's kind (threads, memory, cpu)."""
    m = WORKER_ARTIFACT.match(name)
    if m is None:
        return "log"
    return "events" if m.group("events") else m.group("kind")


def read_events(path: str, needle: str = "", component: str = "") -> tuple[list[dict], int]:
    """(the newest MAX_EVENTS events, or of those matching ``needle`` and ``component``,
    oldest first; the bytes looked at). Without a search only the file's tail is read."""
    key = needle.encode("utf-8", "replace") if needle else b""
    # format_event's own spelling of the field, so a value holding the text does not match
    comp = f'"component":{json.dumps(component)}'.encode() if component else b""
    found: list[dict] = []
    with open_log(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        start = 0 if key or comp else max(0, size - EVENTS_TAIL)
        fh.seek(start)
        if start:
            fh.readline(MAX_LINE)  # a partial first line
        scanned = 0
        for line in iter(lambda: fh.readline(MAX_LINE), b""):
            scanned += len(line)
            if scanned > MAX_SCAN:
                break
            if (key and key not in line) or (comp and comp not in line):
                continue
            ev = parse_event(line)
            if ev is not None:
                found.append(ev)
                if len(found) > 2 * MAX_EVENTS:
                    del found[:-MAX_EVENTS]
    return found[-MAX_EVENTS:], scanned


def _when(ts: object) -> str:
    try:
        t = float(ts)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font:14px system-ui,sans-serif;margin:0;background:#f8fafc;color:#1d2330}}
header{{background:#111827;color:#f9fafb;padding:10px 20px}} header a{{color:#f9fafb}}
main{{padding:14px 20px}} pre{{background:#0b1020;color:#e5e7eb;padding:12px;overflow:auto;
max-height:75vh;font:12px/1.4 ui-monospace,monospace}} table{{border-collapse:collapse}}
td,th{{padding:4px 10px;border-bottom:1px solid #e5e7eb;text-align:left}} .muted{{color:#6b7280}}
mark{{background:#fde68a}}</style></head><body><header><a href="/">Squall logviewer</a> {crumbs}
</header><main>{body}</main></body></html>"""


def make_app(roots: list[str]) -> Flask:
    app = Flask("squall.logviewer", static_folder=None)

    def named() -> str:
        name = request.args.get("file", "")
        try:
            path = resolve(roots, name)
        except BadName as e:
            raise _Refused(400, str(e)) from None
        if path is None:
            raise _Refused(404, f"no log named {name!r} here; / lists them")
        return path

    @app.errorhandler(_Refused)
    def refused(e: "_Refused"):
        return json_error(e.status, e.message)

    @app.errorhandler(BadName)
    def bad_name(e: BadName):  # the file changed into something else after resolve()
        return json_error(400, str(e))

    @app.get("/")
    def index():
        rows = []
        for group, files in list_logs(roots).items():
            rows.append(f"<tr><th colspan=4>{html.escape(group)}</th></tr>")
            for name, size, mtime in files:
                rows.append(_file_row(name, size, mtime))
        body = "<table>" + "".join(rows) + "</table>" if rows else \
            "<p class=muted>No logs yet.</p>"
        return _PAGE.format(title="Logs", crumbs="", body=body)

    @app.get("/log")
    def page():
        path = named()
        name = os.path.basename(path)
        needle = request.args.get("q", "")
        data, start, size = read_range(path, None, TAIL_BYTES)
        raw = data.decode("utf-8", "replace")
        # Mark the matches in the text, then escape the pieces (marking escaped text would
        # match inside entities such as &lt;).
        text = f"<mark>{html.escape(needle)}</mark>".join(
            html.escape(part) for part in raw.split(needle)) if needle else html.escape(raw)
        q = quote(os.path.basename(path), safe="")
        form = (f"<form action='/log'><input type=hidden name=file value='{html.escape(name)}'>"
                f"<input name=q value='{html.escape(needle)}' placeholder='search'> "
                f"<button>Search</button> <a href='/download?file={q}'>download</a> "
                f"<span class=muted>showing bytes {start:,}-{size:,} of {size:,}</span></form>")
        matches = ""
        if needle:
            found = search(path, needle)
            matches = "<h3>Matches</h3><table>" + "".join(
                f"<tr><td class=muted>{m['line']}</td><td>{html.escape(m['text'])}</td></tr>"
                for m in found) + "</table>" if found else "<p class=muted>No match.</p>"
        return _PAGE.format(title=html.escape(name), crumbs="› " + html.escape(name),
                            body=form + matches + f"<pre id=log>{text}</pre>")

    def worker_of(tid: str, host_port: str) -> tuple[str, int]:
        _, sep, port = host_port.rpartition(":")
        if not sep or not port.isdigit() or not tid or "/" in tid or "\0" in tid:
            raise _Refused(400, f"{host_port[:80]!r}: give the worker as HOST:PORT after the "
                                "topology id")
        return tid, int(port)

    @app.get("/dumps/<tid>/<host_port>")
    def dumps_page(tid: str, host_port: str):
        tid, port = worker_of(tid, host_port)
        rows = [_file_row(n, size, mtime) for n, size, mtime in worker_files(roots, tid, port)]
        body = ("<table>" + "".join(rows) + "</table>") if rows else \
            "<p class=muted>No logs or dumps of this worker on this host.</p>"
        return _PAGE.format(title=html.escape(f"{tid} {host_port}"),
                            crumbs="› " + html.escape(f"{tid} {host_port}"),
                            body=f"<h3>Worker {html.escape(host_port)} of "
                                 f"{html.escape(tid)}</h3>" + body)

    @app.get("/api/v1/dumps/<tid>/<host_port>")
    def dumps_json(tid: str, host_port: str):
        tid, port = worker_of(tid, host_port)
        return jsonify({"topologyId": tid, "hostPort": host_port, "files": [
            {"name": n, "kind": kind_of(n), "size": size, "mtime": mtime,
             "link": _view_link(n)}
            for n, size, mtime in worker_files(roots, tid, port)]})

    @app.get("/dump")
    def dump():
        path = named()
        name = os.path.basename(path)
        m = WORKER_ARTIFACT.match(name)
        if m is None or not m.group("kind"):
            raise _Refused(400, f"{name!r} is not a dump; /log?file= shows logs")
        svg = m.group("ext") == "svg"
        resp = send_file(open_log(path), mimetype="image/svg+xml" if svg else "text/plain",
                         download_name=name)
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Content-Security-Policy"] = SVG_POLICY
        return resp

    @app.get("/events")
    def events():
        path = named()
        name = os.path.basename(path)
        m = WORKER_ARTIFACT.match(name)
        if m is None or not m.group("events"):
            raise _Refused(400, f"{name!r} is not an events log; /log?file= shows logs")
        needle = request.args.get("q", "")
        component = request.args.get("component", "")
        found, scanned = read_events(path, needle, component)
        rows = "".join(
            f"<tr><td class=muted>{_when(e.get('ts'))}</td>"
            f"<td>{html.escape(str(e.get('component')))}</td>"
            f"<td>{html.escape(str(e.get('task')))}</td>"
            f"<td>{html.escape(str(e.get('stream')))}</td>"
            f"<td>{html.escape(str(e.get('messageId') or ''))}</td>"
            f"<td><code>{html.escape(str(e.get('values')))}</code></td></tr>" for e in found)
        q = quote(name, safe="")
        form = (f"<form action='/events'><input type=hidden name=file value='{html.escape(name)}'>"
                f"<input name=q value='{html.escape(needle)}' placeholder='search'> "
                f"<input name=component value='{html.escape(component)}' "
                f"placeholder='component'> <button>Search</button> "
                f"<a href='/download?file={q}'>download</a> <span class=muted>"
                f"{len(found)} events, newest last (at most {MAX_EVENTS}; "
                f"{scanned:,} bytes read)</span></form>")
        table = ("<table id=events><tr><th>time (UTC)</th><th>component</th><th>task</th>"
                 "<th>stream</th><th>message id</th><th>values</th></tr>" + rows + "</table>"
                 ) if found else "<p class=muted>No events.</p>"
        return _PAGE.format(title=html.escape(name), crumbs="› " + html.escape(name),
                            body=form + table)

    @app.get("/api/v1/log")
    def raw():
        path = named()
        try:
            start = request.args.get("start")
            start_n = None if start in (None, "") else int(start)
            length = int(request.args.get("length", TAIL_BYTES))
        except ValueError:
            return json_error(400, "start and length must be whole numbers of bytes")
        data, start_n, size = read_range(path, start_n, length)
        return Response(data, mimetype="text/plain",
                        headers={"X-Log-Start": str(start_n), "X-Log-Size": str(size)})

    @app.get("/search")
    def find():
        path = named()
        return jsonify({"file": os.path.basename(path),
                        "matches": search(path, request.args.get("q", ""))})

    @app.get("/download")
    def download():
        path = named()
        return send_file(open_log(path), as_attachment=True, download_name=os.path.basename(path),
                         mimetype="text/plain")

    return app


def _view_link(name: str) -> str:
    """Where a file of the log directory is best looked at."""
    q = quote(name, safe="")
    kind = kind_of(name)
    if kind == "events":
        return f"/events?file={q}"
    return f"/dump?file={q}" if kind != "log" else f"/log?file={q}"


def _file_row(name: str, size: int, mtime: float) -> str:
    q = quote(name, safe="")
    return (f"<tr><td><a href='{_view_link(name)}'>{html.escape(name)}</a></td>"
            f"<td>{size:,} B</td><td class=muted>"
            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(mtime))}</td>"
            f"<td><a href='/download?file={q}'>download</a></td></tr>")


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message
