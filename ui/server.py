"""``squall ui``: the REST API and the page on ``ui.host:ui.port``, and the UI's own
Prometheus metrics at ``/metrics`` on the same port."""

from __future__ import annotations

import json
import logging
import os
import ssl
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Mapping
from urllib.parse import quote

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ..client import config as cfg
from ..client.contract import worker_log_name
from ..client.daemon import Daemon
from ..client.errors import NimbusError, SquallError
from ..client.profiling import events_name
from ..client.nimbus_client import NimbusClient
from ..client.web import WebServer, read_token, scheme_for, sign_link

log = logging.getLogger("squall.ui")

#: Listing a worker's files through its host's logviewer: the wait, the bytes and the files
#: taken from its answer.
DUMPS_TIMEOUT_SECS = 3.0
DUMPS_MAX_BYTES = 256 * 1024
DUMPS_MAX_FILES = 100


class UiMetrics:
    """Requests served by the UI, by endpoint and status, and how long they took."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("squall_ui_requests", "HTTP requests served by the UI",
                                ["method", "endpoint", "status"], registry=self.registry)
        self.seconds = Histogram("squall_ui_request_seconds", "Time to answer a request",
                                 ["endpoint"], registry=self.registry)

    def observe(self, method: str, endpoint: str, status: int, secs: float) -> None:
        self.requests.labels(method, endpoint, str(status)).inc()
        self.seconds.labels(endpoint).observe(secs)


class LogLinks:
    """Links to the logviewers, signed with the cluster's token (client/web.py
    ``sign_link``): the browser's login cookie is per host, and a link may lead to another
    host's logviewer. Called as ``links(topology id, host, port)``: that worker's log."""

    def __init__(self, conf: Mapping[str, Any], port: int | None = None,
                 token: str | None = None):
        self.conf, self.token = conf, token
        self.port = port or int(cfg.get(conf, cfg.LOGVIEWER_PORT))

    def base(self, host: str) -> str:
        """``scheme://host:port`` of ``host``'s logviewer (HTTPS off loopback with TLS)."""
        return f"{scheme_for(self.conf, host)}://{host}:{self.port}"

    def url(self, host: str, path: str, query: str = "") -> str:
        signed = sign_link(self.token, f"{host}:{self.port}", path, query) if self.token \
            else (f"{path}?{query}" if query else path)
        return self.base(host) + signed

    def __call__(self, tid: str, host: str, worker_port: int) -> str:
        return self.url(host, "/log", f"file={quote(worker_log_name(tid, worker_port), safe='')}")

    def dumps(self, tid: str, host: str, worker_port: int) -> str:
        """The worker's page: its logs, dumps and events log (Storm's dumps listing)."""
        return self.url(host, f"/dumps/{quote(tid, safe='')}/{quote(f'{host}:{worker_port}')}")

    def events(self, tid: str, host: str, worker_port: int, component: str = "") -> str:
        """The worker's sampled events (squall debug), of one component if given."""
        query = f"file={quote(events_name(tid, worker_port), safe='')}" + \
            (f"&component={quote(component, safe='')}" if component else "")
        return self.url(host, "/events", query)

    def file(self, host: str, view: str) -> str:
        """A logviewer's own link to a file (``/dump?file=...``), signed for the browser."""
        path, _, query = view.partition("?")
        return self.url(host, path, query)

    def list_dumps(self, tid: str, host: str, worker_port: int,
                   timeout: float = DUMPS_TIMEOUT_SECS) -> list[dict]:
        """The worker's files, as its host's logviewer lists them (asked by the UI daemon
        with the token: the page cannot read another host's logviewer itself); SquallError
        when that logviewer does not answer."""
        base = self.base(host)
        url = (f"{base}/api/v1/dumps/{quote(tid, safe='')}/"
               f"{quote(f'{host}:{worker_port}')}")
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.token}"}
                                     if self.token else {})
        handlers: list[Any] = [_NoRedirect()]  # the token goes to this URL and nowhere else
        if base.startswith("https:"):
            handlers.append(urllib.request.HTTPSHandler(context=ssl.create_default_context(
                cafile=self.conf.get(cfg.SQUALL_TLS_CA_FILE))))
        try:
            with urllib.request.build_opener(*handlers).open(req, timeout=timeout) as resp:
                data = json.loads(resp.read(DUMPS_MAX_BYTES + 1)[:DUMPS_MAX_BYTES])
        except (OSError, ValueError) as e:  # URLError and HTTPError are OSErrors
            raise SquallError(f"the logviewer of {host} ({base}) did not list the worker's "
                              f"files: {e}") from None
        files = data.get("files") if isinstance(data, dict) else None
        out = []
        for f in (files if isinstance(files, list) else [])[:DUMPS_MAX_FILES]:
            if isinstance(f, dict) and isinstance(f.get("link"), str) and \
                    str(f["link"]).startswith("/"):
                out.append({"name": str(f.get("name", "")), "kind": str(f.get("kind", "")),
                            "size": f.get("size"), "mtime": f.get("mtime"),
                            "link": self.file(host, f["link"])})
        return out


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuses redirects: urllib would carry the Authorization header to wherever they lead."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise urllib.error.HTTPError(req.full_url, code, f"refused a redirect to {newurl}",
                                     headers, fp)


class LeaderClient(NimbusClient):
    """A NimbusClient that checks every ``recheck_secs`` that it talks to the leader.

    Shared by the web server's threads: moving to another Nimbus swaps the channel and
    keeps the old one open until :meth:`shutdown`, so calls in flight on it finish.
    """

    def __init__(self, conf: Mapping[str, Any], recheck_secs: float = 10.0):
        self._retired: list[Any] = []
        super().__init__(conf)
        self.recheck_secs = recheck_secs
        self._checked = 0.0
        self._lock = threading.Lock()

    def close(self) -> None:
        """Retire the current channel (a switch); :meth:`shutdown` closes them all."""
        if getattr(self, "_channel", None) is not None:
            self._retired.append(self._channel)

    def shutdown(self) -> None:
        self.close()
        for ch in self._retired:
            ch.close()
        self._retired.clear()

    def _call(self, method: str, request, stream: bool = False, **kw):
        if method != "GetLeader":
            now = time.monotonic()
            with self._lock:
                due = now - self._checked >= self.recheck_secs
                if due:
                    self._checked = now
            if due:
                try:
                    self.prefer_leader()
                except NimbusError as e:  # no leader right now: any Nimbus answers reads
                    log.warning("UI: cannot find the Nimbus leader (%s); reading from %s",
                                e, self.address)
        return super()._call(method, request, stream, **kw)


class WebDaemon(Daemon):
    """A daemon whose face is one authenticated WebServer (client/web.py)."""

    #: What the console calls it.
    label = "web daemon"

    def __init__(self, conf: Mapping[str, Any], host: str, port: int, insecure: bool):
        super().__init__()
        self.conf = dict(conf)
        self.host, self.port, self.insecure = host, port, insecure
        self.web: WebServer | None = None

    def login_url(self, path: str = "/") -> str:
        assert self.web is not None
        return self.web.login_url(path)

    @property
    def url(self) -> str:
        assert self.web is not None
        return self.web.url

    def close_unsafe(self, reason: str) -> None:
        if self.web is not None:
            self.web.stop()


class UiServer(WebDaemon):
    """The UI daemon. Example: ``UiServer(conf, port=0).start().login_url()``."""

    label = "UI"

    def __init__(self, conf: Mapping[str, Any], host: str | None = None,
                 port: int | None = None, insecure: bool = False,
                 logviewer_port: int | None = None):
        super().__init__(conf, host if host is not None else str(cfg.get(conf, cfg.UI_HOST)),
                         int(cfg.get(conf, cfg.UI_PORT)) if port is None else port, insecure)
        self.logviewer_port = logviewer_port
        self.client: LeaderClient | None = None

    def start_unsafe(self) -> None:
        from flask import Response

        from ..client import __version__ as version
        from .rest import make_app

        self.client = LeaderClient(self.conf)
        metrics = UiMetrics()
        app = make_app(self.client, self.conf, version,
                       LogLinks(self.conf, self.logviewer_port, read_token(self.conf)), metrics)

        @app.get("/metrics")
        def prometheus():
            return Response(generate_latest(metrics.registry), content_type=CONTENT_TYPE_LATEST)

        self.web = WebServer(app, self.host, self.port, self.conf, "ui", insecure=self.insecure)
        log.info("UI serving %s (Nimbus %s)", self.web.url, self.client.address)

    def close_unsafe(self, reason: str) -> None:
        super().close_unsafe(reason)
        if self.client is not None:
            self.client.shutdown()


class LogViewerServer(WebDaemon):
    """The logviewer daemon over ``roots`` (default: ``<storm.local.dir>/logs``)."""

    label = "logviewer"

    def __init__(self, conf: Mapping[str, Any], roots: list[str] | None = None,
                 host: str | None = None, port: int | None = None, insecure: bool = False):
        super().__init__(conf,
                         host if host is not None else str(cfg.get(conf, cfg.LOGVIEWER_HOST)),
                         int(cfg.get(conf, cfg.LOGVIEWER_PORT)) if port is None else port,
                         insecure)
        self.roots = roots or [os.path.join(str(cfg.get(conf, cfg.STORM_LOCAL_DIR)), "logs")]

    def start_unsafe(self) -> None:
        from .logviewer import make_app

        self.web = WebServer(make_app(self.roots), self.host, self.port, self.conf,
                             "logviewer", insecure=self.insecure)
        log.info("logviewer serving %s from %s", self.web.url, ", ".join(self.roots))
