"""``squall logviewer``: this host's worker and daemon logs over HTTP (Storm's logviewer).

Serves the files directly inside the log roots (a supervisor's ``<storm.local.dir>/logs``:
``<topology id>-<port>.log`` and its rotations ``.1`` ... ``.N``, and daemon logs):

* ``/``                      the files, grouped by topology;
* ``/log?file=F``            a page with the file's tail and a search box;
* ``/api/v1/log?file=F&start=S&length=L``  raw bytes (Storm's endpoint; default: the tail);
* ``/search?file=F&q=TEXT``  matching lines as JSON (bounded);
* ``/download?file=F``       the whole file.

A file is named, never pathed: a name with a separator, ``..`` or a NUL is refused (400),
and a name whose real path (symlinks resolved) leaves its root is refused too, so a
symlink in the log directory cannot expose ``/etc/passwd``.
"""

from __future__ import annotations

import html
import os
import stat
import time
from typing import Iterable
from urllib.parse import quote

from flask import Flask, Response, jsonify, request, send_file

from ..client.contract import WORKER_LOG
from .rest import json_error

#: Bytes of a file shown by default on its page (Storm shows the last page of 51200).
TAIL_BYTES = 64 * 1024
#: The most bytes /api/v1/log returns at once.
MAX_LENGTH = 1024 * 1024
#: Search: lines returned, bytes scanned, and bytes of one line read at once, at most.
MAX_MATCHES = 200
MAX_SCAN = 64 * 1024 * 1024
MAX_LINE = 64 * 1024


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
            m = WORKER_LOG.match(name)
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
                q = quote(name, safe="")
                rows.append(f"<tr><td><a href='/log?file={q}'>{html.escape(name)}</a></td>"
                            f"<td>{size:,} B</td><td class=muted>"
                            f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(mtime))}</td>"
                            f"<td><a href='/download?file={q}'>download</a></td></tr>")
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


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message
