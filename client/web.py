"""The one way Squall serves HTTP: the UI, the logviewer and the Prometheus ``/metrics`` ports.

* A production WSGI server (cheroot, CherryPy's server: threads, timeouts, TLS), not
  ``http.server``.
* Every port is authenticated with one cluster secret, ``squall.http.token.file``: scripts
  and Prometheus send ``Authorization: Bearer <token>``; a browser opens the URL with
  ``?token=<token>`` once (as Jupyter does), gets an HttpOnly, SameSite=Strict cookie and is
  redirected to the URL without the token. A POST authenticated by the cookie must also carry
  the ``X-Squall-Csrf`` header (a cross-site form cannot set it). Why one shared secret and
  not per-user logins is in SECURITY.md.
* A link from one host's page to another host's (the UI's links to every logviewer) is
  signed with the token (:func:`sign_link`) and expires: the browser's cookie is per host,
  and the token itself never goes into a URL the pages show.
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
import time
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import parse_qsl, quote, unquote, urlencode

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
                          "`(umask 0027; head -c 32 /dev/urandom | base64 > /etc/squall/http.token)` "
                          "(readable by the daemons' group only) and set "
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


#: How long a signed link (:func:`sign_link`) opens its page, and the read-only session it
#: starts there lasts: the UI makes its links anew on every refresh, so an hour covers a page
#: left open; clocks of a cluster's hosts may differ by minutes, not hours.
LINK_TTL_SECS = 3600
#: How long the session a login with the token starts (``?token=``) lasts.
SESSION_SECS = 7 * 86400


def _link_mac(token: bytes, netloc: str, path: str, query: str) -> str:
    msg = f"squall link\n{netloc.lower()}\n{path}\n{query}"
    return hmac.new(token, msg.encode(), hashlib.sha256).hexdigest()


def sign_link(token: str, netloc: str, path: str, query: str = "", now: float | None = None,
              ttl: float = LINK_TTL_SECS) -> str:
    """``path?query`` on ``netloc`` (``host:port``; ``path`` and ``query`` URL-encoded) signed
    with the cluster's token: that host's port serves it, and starts a read-only session
    there, until ``ttl`` seconds from now. Returns ``path?query&expires=...&sig=...``."""
    expires = int((time.time() if now is None else now) + ttl)
    query = f"{query}&expires={expires}" if query else f"expires={expires}"
    # The decoded path: the server sees PATH_INFO decoded (``%3A`` as ``:``).
    return f"{path}?{query}&sig={_link_mac(token.encode(), netloc, unquote(path), query)}"


def scheme_for(conf: Mapping[str, Any], host: str) -> str:
    """How to reach another daemon's HTTP port on ``host``: HTTPS wherever it serves it (off
    loopback, with the cluster's certificates: :class:`WebServer`'s rule), so the token in a
    request never crosses a network in the clear."""
    return "https" if tls.enabled(conf) and not loopback(host) else "http"


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
        #: ``__Host-`` (HTTPS only): the browser refuses it from subdomains and plain HTTP.
        self.cookie = ("__Host-" if secure_cookie else "") + COOKIE

    def _ok(self, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), self.token)

    def session(self, scope: str = "rw", expires: int | None = None) -> str:
        """A session cookie's value: ``scope.expires.mac``, derived from the token, never the
        token (cookies are not scoped by port: another service on the host name would receive
        it). ``rw`` from a login with the token, ``ro`` from a signed link (reads only)."""
        if expires is None:
            expires = int(time.time() + SESSION_SECS)
        mac = hmac.new(self.token, f"squall browser session\n{scope}\n{expires}".encode(),
                       hashlib.sha256).hexdigest()
        return f"{scope}.{expires}.{mac}"

    def _session_scope(self, given: str | None) -> str | None:
        """The scope of a valid, unexpired session cookie; else None."""
        scope, _, rest = (given or "").partition(".")
        expires, _, _ = rest.partition(".")
        if scope not in ("rw", "ro") or not expires.isdigit() or int(expires) < time.time():
            return None
        return scope if hmac.compare_digest(given.encode(),
                                            self.session(scope, int(expires)).encode()) else None

    def _set_cookie(self, scope: str = "rw", expires: int | None = None) -> str:
        value = self.session(scope, expires)
        max_age = max(0, int(value.split(".")[1]) - int(time.time()))
        return f"{self.cookie}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict" + \
            ("; Secure" if self.secure_cookie else "")

    def _signed(self, environ: dict) -> int | str | None:
        """None: not a signed link; its expiry time if valid; else why it is refused."""
        head, sep, sig = environ.get("QUERY_STRING", "").rpartition("&sig=")
        if not sep:
            return None
        expires = next((v for k, v in parse_qsl(head) if k == "expires"), "")
        # PATH_INFO is the decoded path as latin-1 (PEP 3333); the link signed it as UTF-8.
        path = environ.get("PATH_INFO", "").encode("latin-1", "replace").decode("utf-8",
                                                                                 "replace")
        mac = _link_mac(self.token, environ.get("HTTP_HOST", ""), path, head)
        if not hmac.compare_digest(sig.encode(), mac.encode()):
            return "this link was not signed with the cluster's token for this page"
        if not expires.isdigit() or int(expires) < time.time():
            return ("this link has expired: reload the page that gave it (or open this "
                    "port's URL with ?token=<token> once)")
        return int(expires)

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "") in self.open_paths:
            return self.app(environ, start_response)
        auth = environ.get("HTTP_AUTHORIZATION", "")
        if auth.startswith("Bearer ") and self._ok(auth[7:].strip()):
            return self.app(environ, start_response)
        query = parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        given = next((v for k, v in query if k == "token"), None)
        method = environ.get("REQUEST_METHOD", "GET")
        signed = self._signed(environ) if given is None else None
        if isinstance(signed, int):
            if method not in ("GET", "HEAD"):
                return _json_error(start_response, "403 Forbidden", "a signed link only reads")
            if self._session_scope(_cookie(environ.get("HTTP_COOKIE", ""), self.cookie)) == "rw":
                return self.app(environ, start_response)  # keep the login the browser has
            # Served at once, not redirected: the link comes from another host's page, and a
            # browser drops a SameSite=Strict cookie on a redirect that follows a cross-site
            # click. The read-only session set here, until the link's own expiry, serves the
            # links within this host's pages.

            def with_cookie(status, headers, exc_info=None):
                return start_response(
                    status, [*headers, ("Set-Cookie", self._set_cookie("ro", signed))], exc_info)
            return self.app(environ, with_cookie)
        if given is not None:
            if not self._ok(given):
                return _json_error(start_response, "401 Unauthorized", "wrong token")
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            # Re-quoted (no CR/LF into the header) with one leading slash ("//host" or
            # "/\\host" would send the browser to another site).
            path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "/")
            location = "/" + quote(path.lstrip("/\\"), safe="/") + (f"?{rest}" if rest else "")
            start_response("303 See Other", [("Location", location),
                                              ("Set-Cookie", self._set_cookie()),
                                              ("Content-Length", "0")])
            return [b""]
        scope = self._session_scope(_cookie(environ.get("HTTP_COOKIE", ""), self.cookie))
        if scope is not None:
            if method not in ("GET", "HEAD"):
                if scope != "rw":
                    return _json_error(start_response, "403 Forbidden",
                                       "a session opened by a link only reads: open this "
                                       "port's URL with ?token=<token> to change anything")
                if not environ.get(CSRF_HEADER):
                    return _json_error(start_response, "403 Forbidden",
                                       "a change made with the login cookie needs the "
                                       "X-Squall-Csrf header (the page sends it)")
            return self.app(environ, start_response)
        if isinstance(signed, str):  # a bad or expired link, and no session to fall back on
            return _json_error(start_response, "401 Unauthorized", signed)
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


#: A request's headers must be complete this many seconds after its connection opened (or,
#: kept alive, after its first byte came): a client that trickles them is closed. A TLS
#: handshake gets HANDSHAKE_SECS.
HEADER_SECS = 10.0
HANDSHAKE_SECS = 5.0
#: Open connections one client address may hold on one port; more are closed at accept.
MAX_CONNECTIONS_PER_CLIENT = 32
#: Header bytes looked at before a request goes to a thread (cheroot refuses larger ones).
_PEEK_BYTES = 64 * 1024


def _guarded_manager(server: Any, name: str):
    """cheroot's connection manager, hardened against slow clients (the UI and logviewer
    answered nobody while 8 connections trickled their headers, a /metrics port while 2
    did): a plain connection goes to one of the server's threads only once its whole
    header block has arrived (seen with MSG_PEEK, so cheroot still reads it all), within
    HEADER_SECS; a TLS handshake runs on a thread, not the accept loop, and it and the
    headers after it are cut off at their deadlines by a watchdog; each client address
    holds at most MAX_CONNECTIONS_PER_CLIENT connections."""
    import select
    import selectors
    import socket
    import ssl
    import time as _time
    from collections import Counter

    from cheroot import connections, errors, server as cserver
    from cheroot.makefile import MakeFile

    class Watchdog:
        """Shuts a socket down when its deadline passes (it unblocks the thread reading)."""

        def __init__(self) -> None:
            self._lock = threading.Lock()
            self._due: dict[int, tuple[float, Any]] = {}

        def start(self, sock: Any, secs: float) -> None:
            with self._lock:
                self._due[id(sock)] = (_time.monotonic() + secs, sock)

        def stop(self, sock: Any) -> None:
            with self._lock:
                self._due.pop(id(sock), None)

        def expire(self, now: float) -> None:
            with self._lock:
                late = [(k, sock) for k, (due, sock) in self._due.items() if due <= now]
                for k, _ in late:
                    del self._due[k]
            for _, sock in late:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    watchdog = Watchdog()

    class Request(cserver.HTTPRequest):
        def parse_request(self) -> None:
            watchdog.start(self.conn.socket, HEADER_SECS)
            try:
                super().parse_request()
            finally:
                watchdog.stop(self.conn.socket)

    class Connection(cserver.HTTPConnection):
        RequestHandlerClass = Request
        counted: str | None = None

        def close(self) -> None:
            manager.release(self)
            super().close()

    class Handshake:
        """A TLS connection before its handshake: done on a server thread, then served."""

        def __init__(self, raw: Any, addr: Any) -> None:
            self.socket = raw
            self.remote_addr, self.remote_port = addr[0], addr[1]
            self.counted: str | None = None
            self.conn: Any = None
            self.last_used = _time.time()

        def communicate(self) -> bool:
            adapter = server.ssl_adapter
            watchdog.start(self.socket, HANDSHAKE_SECS)
            try:
                wrapped, env = adapter.wrap(self.socket)
            except (errors.FatalSSLAlert, errors.NoSSLError, OSError):
                return False
            finally:
                watchdog.stop(self.socket)
            wrapped.settimeout(server.timeout)
            conn = self.conn = Connection(server, wrapped, adapter.makefile)
            conn.remote_addr, conn.remote_port = self.remote_addr, self.remote_port
            conn.ssl_env = env
            conn.counted, self.counted = self.counted, None  # the connection releases it
            return conn.communicate()

        def close(self) -> None:
            if self.conn is not None:
                self.conn.close()
            else:
                manager.release(self)
                self.socket.close()

    class Manager(connections.ConnectionManager):
        def __init__(self, srv: Any) -> None:
            super().__init__(srv)
            self._clients: Counter[str] = Counter()
            self._count_lock = threading.Lock()
            #: Plain connections whose headers are still coming: fd -> (conn, deadline);
            #: out of the selector, looked at every 50 ms.
            self._waiting: dict[int, tuple[Any, float]] = {}
            #: New plain connections in the selector, nothing received yet:
            #: fd -> (conn, deadline).
            self._fresh: dict[int, tuple[Any, float]] = {}
            self._refused_logged = 0.0

        def release(self, conn: Any) -> None:
            with self._count_lock:
                ip, conn.counted = conn.counted, None
                if ip is not None:
                    self._clients[ip] -= 1
                    if self._clients[ip] <= 0:
                        del self._clients[ip]

        def put(self, conn: Any) -> None:
            if isinstance(conn, Handshake):
                conn = conn.conn
            conn.last_used = _time.time()
            if conn.rfile.has_data():
                self.server.process_conn(conn)
            else:
                self._selector.register(conn.socket.fileno(), selectors.EVENT_READ, data=conn)

        def _from_server_socket(self, server_socket: Any) -> None:
            try:
                raw, addr = server_socket.accept()
            except OSError:
                return None  # nothing to accept after all, or the socket closed
            connections.prevent_socket_inheritance(raw)
            raw.settimeout(self.server.timeout)
            ip = str(addr[0]) if isinstance(addr, tuple) else ""
            with self._count_lock:
                over = self._clients[ip] >= MAX_CONNECTIONS_PER_CLIENT
                if not over:
                    self._clients[ip] += 1
            if over:
                raw.close()
                now = _time.monotonic()
                if now - self._refused_logged > 60:
                    self._refused_logged = now
                    log.warning("%s: %s holds %d connections; closing more at once",
                                name, ip, MAX_CONNECTIONS_PER_CLIENT)
                return None
            if self.server.ssl_adapter is not None:
                hs = Handshake(raw, addr)
                hs.counted = ip
                self.server.process_conn(hs)  # a thread does the handshake, under a deadline
                return None
            conn = Connection(self.server, raw, MakeFile)
            conn.counted = ip
            conn.remote_addr, conn.remote_port = addr[0], addr[1]
            conn.ssl_env = {}
            conn.last_used = _time.time()
            # Not a thread's until its first bytes come (in the selector) and all its
            # headers (peeked below).
            self._fresh[raw.fileno()] = (conn, _time.monotonic() + HEADER_SECS)
            self._selector.register(raw.fileno(), selectors.EVENT_READ, data=conn)
            return None

        def _headers_in(self, conn: Any) -> bool | None:
            """True: the header block is there (or something cheroot must answer); False:
            not yet; None: the client closed."""
            if isinstance(conn.socket, ssl.SSLSocket):
                # A kept-alive HTTPS connection: its bytes cannot be peeked at (recv takes no
                # flags there, and raised out of the serve loop, stopping the port); a thread
                # reads them under the header watchdog (Request.parse_request).
                return True
            try:
                data = conn.socket.recv(_PEEK_BYTES, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                return False
            except OSError:
                return None
            if not data:
                return None
            if b"\n\r\n" in data or b"\n\n" in data or len(data) >= _PEEK_BYTES:
                return True
            # Part of a header block, and the client may have closed after it (a peek sees
            # the bytes, not the end behind them).
            poll = select.poll()
            poll.register(conn.socket.fileno(), getattr(select, "POLLRDHUP", 0x2000))
            return None if poll.poll(0) else False

        def _run(self, expiration_interval: float) -> None:
            last_expiration_check = _time.time()
            waiting = self._waiting
            while not self._stop_requested:
                timeout = min(expiration_interval, 0.05 if waiting else 0.5) \
                    if waiting or self._fresh else expiration_interval
                try:
                    active = self._selector.select(timeout=timeout)
                except OSError:
                    self._remove_invalid_sockets()
                    continue
                now = _time.monotonic()
                watchdog.expire(now)
                fresh = self._fresh
                for fd, conn in list(active):
                    if conn is self.server:
                        self._from_server_socket(self.server.socket)
                        continue
                    self._selector.unregister(fd)
                    # A new connection's deadline runs from accept; a kept-alive one's
                    # from its next request's first byte.
                    deadline = fresh.pop(fd, (conn, now + HEADER_SECS))[1]
                    state = self._headers_in(conn)
                    if state:
                        self.server.process_conn(conn)
                    elif state is None:
                        conn.close()
                    else:
                        waiting[fd] = (conn, deadline)
                for fd, (conn, deadline) in list(fresh.items()):  # connected, silent since
                    if now >= deadline:
                        del fresh[fd]
                        try:
                            self._selector.unregister(fd)
                        except KeyError:
                            pass  # dropped already as an invalid socket
                        conn.close()
                # Level-triggered: a partly sent header block would wake select at once, so
                # the waiting are looked at every 50 ms instead, off the selector.
                for fd, (conn, deadline) in list(waiting.items()):
                    state = self._headers_in(conn)
                    if state is False and now < deadline:
                        continue
                    del waiting[fd]
                    if state:
                        self.server.process_conn(conn)
                    else:
                        conn.close()  # closed by the client, or too slow
                wall = _time.time()
                if wall - last_expiration_check > expiration_interval:
                    self._expire(threshold=wall - self.server.timeout)
                    last_expiration_check = wall

        def close(self) -> None:
            for conn, _ in list(self._waiting.values()):
                conn.close()
            self._waiting.clear()
            super().close()

    manager = Manager(server)
    return manager


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
        if use_tls:
            tls.check_serving(conf, host, port, name)
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
        self.server._connections.close()
        self.server._connections = _guarded_manager(self.server, name)
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
