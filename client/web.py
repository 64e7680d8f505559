"""The one way Squall serves HTTP: the UI, the logviewer and the Prometheus ``/metrics`` ports.

* A production WSGI server (cheroot, CherryPy's server: threads, timeouts, TLS), not
  ``http.server``.
* Every port is authenticated with one cluster secret, ``squall.http.token.file``: scripts
  and Prometheus send ``Authorization: Bearer <token>``; a browser opens the URL with
  ``?token=<token>`` once (as Jupyter does), gets an HttpOnly, SameSite=Strict cookie and is
  redirected to the URL without the token. A POST authenticated by the cookie must also carry
  the ``X-Squall-Csrf`` header (a cross-site form cannot set it). Why one shared secret and
  not per-user logins is in SECURITY.md.
* Plain HTTP on loopback; a non-loopback address is served over HTTPS with ``squall.tls.*``
  (the certificate must be a server certificate), or plain only with an explicit
  ``insecure``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import threading
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import parse_qsl, quote, urlencode

from . import config as cfg
from . import tls
from .errors import ConfigError, SquallError

log = logging.getLogger("squall.web")

COOKIE = "squall_token"
CSRF_HEADER = "HTTP_X_SQUALL_CSRF"

WSGIApp = Callable[[dict, Callable], Iterable[bytes]]


def read_token(conf: Mapping[str, Any]) -> str:
    """The cluster's HTTP secret from ``squall.http.token.file``; a ConfigError says how to
    make one."""
    path = conf.get(cfg.SQUALL_HTTP_TOKEN_FILE)
    if not path:
        raise ConfigError(cfg.SQUALL_HTTP_TOKEN_FILE,
                          "not set: every HTTP port of Squall asks for a token; make one with "
                          "`head -c 32 /dev/urandom | base64 > /etc/squall/http.token` and set "
                          f"{cfg.SQUALL_HTTP_TOKEN_FILE} to its path")
    try:
        with open(path, encoding="utf-8") as fh:
            token = fh.read().strip()
    except OSError as e:
        raise ConfigError(cfg.SQUALL_HTTP_TOKEN_FILE, f"cannot read {path}: {e.strerror}") from None
    if len(token) < 16:
        raise ConfigError(cfg.SQUALL_HTTP_TOKEN_FILE,
                          f"{path} holds {len(token)} characters; use at least 16 random ones")
    return token


def new_token() -> str:
    return secrets.token_urlsafe(32)


def _json_error(start_response, status: str, message: str,
                headers: list[tuple[str, str]] = ()) -> list[bytes]:
    body = json.dumps({"error": status, "errorMessage": message}).encode()
    start_response(status, [("Content-Type", "application/json"),
                            ("Content-Length", str(len(body))), *headers])
    return [body]


class TokenAuth:
    """WSGI middleware: only requests carrying the token reach ``app``."""

    def __init__(self, app: WSGIApp, token: str, secure_cookie: bool = False,
                 open_paths: Iterable[str] = ()):
        self.app = app
        self.token = token.encode()
        self.secure_cookie = secure_cookie
        self.open_paths = frozenset(open_paths)
        # The browser keeps a value derived from the token, never the token: cookies are not
        # scoped by port, so another service on the host name would receive it.
        self.session = hmac.new(self.token, b"squall browser session",
                                hashlib.sha256).hexdigest()
        #: ``__Host-`` (HTTPS only): the browser refuses it from subdomains and plain HTTP.
        self.cookie = ("__Host-" if secure_cookie else "") + COOKIE

    def _ok(self, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), self.token)

    def _session_ok(self, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), self.session.encode())

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "") in self.open_paths:
            return self.app(environ, start_response)
        auth = environ.get("HTTP_AUTHORIZATION", "")
        if auth.startswith("Bearer ") and self._ok(auth[7:].strip()):
            return self.app(environ, start_response)
        query = parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        given = next((v for k, v in query if k == "token"), None)
        if given is not None:
            if not self._ok(given):
                return _json_error(start_response, "401 Unauthorized", "wrong token")
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            # Re-quoted (no CR/LF into the header) with one leading slash ("//host" or
            # "/\\host" would send the browser to another site).
            path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "/")
            location = "/" + quote(path.lstrip("/\\"), safe="/") + (f"?{rest}" if rest else "")
            cookie = f"{self.cookie}={self.session}; Path=/; HttpOnly; SameSite=Strict" + \
                ("; Secure" if self.secure_cookie else "")
            start_response("303 See Other", [("Location", location), ("Set-Cookie", cookie),
                                              ("Content-Length", "0")])
            return [b""]
        if self._session_ok(_cookie(environ.get("HTTP_COOKIE", ""), self.cookie)):
            if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD") and \
                    not environ.get(CSRF_HEADER):
                return _json_error(start_response, "403 Forbidden",
                                   "a change made with the login cookie needs the "
                                   "X-Squall-Csrf header (the page sends it)")
            return self.app(environ, start_response)
        return _json_error(start_response, "401 Unauthorized",
                           "this port needs the cluster's token: send 'Authorization: Bearer "
                           f"<token>' or open the URL with ?token=<token> once (the token is "
                           f"in the file named by {cfg.SQUALL_HTTP_TOKEN_FILE})",
                           [("WWW-Authenticate", 'Bearer realm="squall"')])


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        k, _, v = part.strip().partition("=")
        if k == name:
            return v
    return None


loopback = tls.loopback  # HTTP ports follow the gRPC ports' rule (client/tls.py)


def _bind_or_close(sock, addr):
    """cheroot's ``bind_socket``, closing the socket when the bind fails (cheroot leaves it to
    the garbage collector: a ResourceWarning)."""
    try:
        sock.bind(addr)
    except OSError:
        sock.close()
        raise
    return sock


class WebServer:
    """One authenticated WSGI app on ``host:port`` (0: a free port), served by threads."""

    def __init__(self, app: WSGIApp, host: str, port: int, conf: Mapping[str, Any],
                 name: str, insecure: bool = False, open_paths: Iterable[str] = (),
                 threads: int = 8):
        from cheroot import wsgi  # imported here: only the web daemons need it

        self.name = name
        # Loopback traffic never leaves the host: plain HTTP there (a browser would not trust
        # the cluster's CA anyway); HTTPS with the daemon's certificate everywhere else.
        use_tls = tls.enabled(conf) and not loopback(host)
        if not use_tls and not loopback(host) and not insecure:
            raise SquallError(f"{name}: refusing plain HTTP on {host}:{port}, which is not a "
                              "loopback address: set squall.tls.* (a server certificate) for "
                              "HTTPS, bind to 127.0.0.1, or pass --insecure")
        self.token = read_token(conf)
        self.scheme = "https" if use_tls else "http"
        wrapped = TokenAuth(app, self.token, secure_cookie=use_tls, open_paths=open_paths)
        self.server = wsgi.Server((host, port), wrapped, numthreads=threads,
                                  server_name=f"squall-{name}", timeout=30)
        if use_tls:
            from cheroot.ssl.builtin import BuiltinSSLAdapter
            self.server.ssl_adapter = BuiltinSSLAdapter(
                conf[cfg.SQUALL_TLS_CERT_FILE], conf[cfg.SQUALL_TLS_KEY_FILE],
                certificate_chain=conf[cfg.SQUALL_TLS_CA_FILE])
        self.server.bind_socket = _bind_or_close
        try:
            self.server.prepare()  # binds now: a taken port fails here, with its address
        except OSError as e:
            raise SquallError(f"{name}: cannot listen on {host}:{port}: {e.strerror or e}") \
                from None
        self.host = host
        self.port = int(self.server.bind_addr[1])
        self._thread = threading.Thread(target=self._serve, name=f"{name}-http", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            self.server.serve()
        except Exception:  # noqa: BLE001 - logged; the daemon's other parts keep running
            log.exception("%s: HTTP server stopped", self.name)

    @property
    def url(self) -> str:
        host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        return f"{self.scheme}://[{host}]:{self.port}" if ":" in host else \
            f"{self.scheme}://{host}:{self.port}"

    def login_url(self, path: str = "/") -> str:
        """The URL a person opens once: it carries the token, which becomes a cookie."""
        return f"{self.url}{path}?token={quote(self.token, safe='')}"  # base64 has + / =

    def stop(self) -> None:
        self.server.stop()
        self._thread.join(timeout=5)


def metrics_server(registry: Any, conf: Mapping[str, Any], port: int, name: str) -> WebServer:
    """A daemon's Prometheus ``/metrics`` (a prometheus-client registry) on
    ``squall.metrics.host:port``, authenticated as every web port is."""
    from prometheus_client import make_wsgi_app

    return WebServer(make_wsgi_app(registry), str(cfg.get(conf, cfg.SQUALL_METRICS_HOST)),
                     int(port), conf, name, threads=2)
