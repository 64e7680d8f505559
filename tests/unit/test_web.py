"""client/web.py: the token every HTTP port asks for, the cookie login, CSRF, and the server."""

import json
import socket
import urllib.error
import urllib.request
from urllib.parse import parse_qs, urlsplit

import pytest
from squall.client import config as cfg
from squall.client import web
from squall.client.errors import ConfigError, SquallError
from werkzeug.test import Client

TOKEN = "s3cret-token-0123456789abcdef"


def echo_app(environ, start_response):
    """A tiny WSGI app: answers with its method, path and query, so a test sees it was reached."""
    body = json.dumps({"method": environ["REQUEST_METHOD"], "path": environ.get("PATH_INFO"),
                       "query": environ.get("QUERY_STRING", "")}).encode()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body)))])
    return [body]


def client(**kw):
    return Client(web.TokenAuth(echo_app, TOKEN, **kw))


def token_file(tmp_path, token=TOKEN):
    path = tmp_path / "http.token"
    path.write_text(token + "\n")
    return str(path)


# --- TokenAuth ----------------------------------------------------------------------------

def test_no_token_is_401_saying_where_the_token_is():
    resp = client().get("/api/v1/cluster")
    assert resp.status_code == 401
    assert resp.headers["WWW-Authenticate"].startswith("Bearer")
    assert resp.headers["Content-Type"] == "application/json"
    assert "squall.http.token.file" in resp.get_json()["errorMessage"]


def test_bearer_token_passes_and_a_wrong_one_is_401():
    c = client()
    ok = c.get("/x?a=1", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and ok.get_json() == {"method": "GET", "path": "/x",
                                                       "query": "a=1"}
    for wrong in (f"Bearer {TOKEN}x", "Bearer ", f"Basic {TOKEN}", TOKEN):
        resp = c.get("/x", headers={"Authorization": wrong})
        assert resp.status_code == 401, wrong
        assert "errorMessage" in resp.get_json()


def test_token_in_the_url_sets_a_cookie_and_redirects_without_it():
    resp = client().get("/topology/wc-1?window=600&token=" + TOKEN + "&sys=true")
    assert resp.status_code == 303
    loc = urlsplit(resp.headers["Location"])
    assert loc.path == "/topology/wc-1"
    assert parse_qs(loc.query) == {"window": ["600"], "sys": ["true"]}
    assert "token" not in resp.headers["Location"]
    cookie = resp.headers["Set-Cookie"]
    # The browser keeps a session value derived from the token, never the token itself:
    # cookies are not scoped by port, and other services on the host would receive it.
    assert cookie.startswith("squall_token=") and TOKEN not in cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "Secure" not in cookie  # plain HTTP on loopback: a Secure cookie would be dropped


def test_the_url_token_alone_redirects_to_the_bare_path_and_is_secure_over_tls():
    resp = client(secure_cookie=True).get(f"/?token={TOKEN}")
    assert resp.status_code == 303 and resp.headers["Location"] == "/"
    assert "; Secure" in resp.headers["Set-Cookie"]
    assert resp.headers["Set-Cookie"].startswith("__Host-squall_token=")


def test_the_login_redirect_stays_on_this_host_and_cannot_inject_a_header():
    for path, where in (("//evil.example/x", "/evil.example/x"),
                        ("/\\evil.example", "/evil.example"),
                        ("/a\r\nSet-Cookie: x=1", "/a%0D%0ASet-Cookie%3A%20x%3D1")):
        resp = client().get("/", query_string={"token": TOKEN},
                            environ_overrides={"PATH_INFO": path})
        assert resp.status_code == 303 and resp.headers["Location"] == where, path


def test_a_wrong_token_in_the_url_is_401_and_sets_no_cookie():
    resp = client().get("/?token=guess&a=1")
    assert resp.status_code == 401
    assert "Set-Cookie" not in resp.headers and "Location" not in resp.headers
    assert resp.get_json()["errorMessage"] == "wrong token"


def test_the_cookie_lets_a_browser_in_after_the_redirect():
    c = client()
    assert c.get(f"/?token={TOKEN}").status_code == 303
    resp = c.get("/logs")  # the test client keeps the cookie, as a browser does
    assert resp.status_code == 200 and resp.get_json()["path"] == "/logs"
    other = client()
    other.set_cookie(web.COOKIE, "not-the-token")
    assert other.get("/logs").status_code == 401


def test_a_signed_link_opens_its_page_on_any_host_of_the_cluster_and_logs_the_browser_in():
    """The UI's log links lead to other hosts' logviewers, where the browser has no cookie
    (it is per host): a link signed with the cluster's token for that host's port serves the
    page at once, without a redirect (a SameSite=Strict cookie is dropped on a redirect after
    a cross-site click), and sets a read-only session there, until the link's own expiry."""
    link = web.sign_link(TOKEN, "localhost", "/log", "file=wc-1%2F6700%2Fworker.log")
    assert TOKEN not in link and link.startswith("/log?file=wc-1%2F6700%2Fworker.log&expires=")
    expires = int(parse_qs(urlsplit(link).query)["expires"][0])
    other_host = client(secure_cookie=True)  # another daemon holding the same token
    resp = other_host.get(link)
    assert resp.status_code == 200 and resp.get_json()["path"] == "/log"
    assert "file=wc-1%2F6700%2Fworker.log" in resp.get_json()["query"]
    cookie = resp.headers["Set-Cookie"]
    assert cookie.startswith(f"__Host-squall_token=ro.{expires}.") and TOKEN not in cookie
    assert "SameSite=Strict" in cookie and "HttpOnly" in cookie and "; Secure" in cookie
    assert 3500 <= int(cookie.split("Max-Age=")[1].split(";")[0]) <= 3600
    assert other_host.get("/log?file=other").status_code == 200  # the session now serves
    # ... for reading only: a change needs the token's own login.
    refused = other_host.post("/api/v1/topology/wc-1/kill/0", headers={"X-Squall-Csrf": "1"})
    assert refused.status_code == 403 and "only reads" in refused.get_json()["errorMessage"]


def test_a_signed_path_with_encoded_characters_is_the_one_the_server_sees():
    """The server checks the decoded path (``%3A`` is ``:`` in PATH_INFO): a worker's dumps
    page, whose path holds its host:port and the topology id (a space in it too)."""
    link = web.sign_link(TOKEN, "localhost", "/dumps/wc%201-2-3/10.0.0.2%3A6700")
    resp = client().get(link)
    assert resp.status_code == 200, resp.get_json()
    assert resp.get_json()["path"] == "/dumps/wc 1-2-3/10.0.0.2:6700"


def test_a_tampered_foreign_expired_or_writing_signed_link_is_refused():
    link = web.sign_link(TOKEN, "localhost", "/log", "file=a.log")
    for bad in (link.replace("file=a.log", "file=b.log"),        # another file
                link.replace("/log?", "/api/v1/topology?"),       # another path
                web.sign_link("another-clusters-token-xyz", "localhost", "/log", "file=a.log"),
                web.sign_link(TOKEN, "otherhost:8000", "/log", "file=a.log"),  # another port
                web.sign_link(TOKEN, "localhost", "/log", "file=a.log", now=1_000_000)):
        resp = client().get(bad)
        assert resp.status_code == 401, bad
        assert "Set-Cookie" not in resp.headers
    assert "expired" in client().get(web.sign_link(TOKEN, "localhost", "/log", "file=a.log",
                                                   ttl=-1)).get_json()["errorMessage"]
    assert client().post(link).status_code == 403  # a link only reads


def test_an_expired_link_still_opens_the_page_for_a_browser_logged_in_there():
    """Reloading a page an old link opened: the session the browser has there serves it."""
    c = client()
    assert c.get(f"/?token={TOKEN}").status_code == 303
    old = web.sign_link(TOKEN, "localhost", "/log", "file=a.log", ttl=-1)
    assert c.get(old).status_code == 200


def test_a_session_expires_and_a_forged_one_is_refused():
    auth = web.TokenAuth(None, TOKEN)
    for value in (auth.session("rw", 1_000_000),                 # long expired
                  auth.session("rw").replace("rw.", "ro.", 1),   # scope changed
                  "rw.99999999999.0123",                          # not its MAC
                  web.TokenAuth(None, "another-token-0123456789").session()):
        c = client()
        c.set_cookie(web.COOKIE, value)
        assert c.get("/").status_code == 401, value
    login = client().get(f"/?token={TOKEN}").headers["Set-Cookie"]
    assert 7 * 86400 - 60 <= int(login.split("Max-Age=")[1].split(";")[0]) <= 7 * 86400


def test_a_post_with_the_cookie_needs_the_csrf_header():
    c = client()
    c.set_cookie(web.COOKIE, web.TokenAuth(None, TOKEN).session())
    assert c.get("/").status_code == 200
    assert c.head("/").status_code == 200
    refused = c.post("/api/v1/topology/wc-1/kill")
    assert refused.status_code == 403
    assert "X-Squall-Csrf" in refused.get_json()["errorMessage"]
    assert c.delete("/api/v1/topology/wc-1").status_code == 403
    ok = c.post("/api/v1/topology/wc-1/kill", headers={"X-Squall-Csrf": "1"})
    assert ok.status_code == 200 and ok.get_json()["method"] == "POST"


def test_a_post_with_the_bearer_token_needs_no_csrf_header():
    resp = client().post("/api/v1/topology/wc-1/kill",
                         headers={"Authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 200 and resp.get_json()["method"] == "POST"


def test_open_paths_need_no_token():
    c = client(open_paths=["/healthz"])
    assert c.get("/healthz").status_code == 200
    assert c.get("/healthz/x").status_code == 401


def test_token_auth_wraps_a_flask_app():
    from flask import Flask

    app = Flask("t")
    app.get("/hello")(lambda: "hi")
    c = Client(web.TokenAuth(app, TOKEN))
    assert c.get("/hello").status_code == 401
    resp = c.get("/hello", headers={"Authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 200 and resp.get_data(as_text=True) == "hi"


# --- read_token ---------------------------------------------------------------------------

def test_read_token_without_the_key_says_how_to_make_one():
    with pytest.raises(ConfigError, match="squall.http.token.file") as e:
        web.read_token({})
    assert e.value.key == cfg.SQUALL_HTTP_TOKEN_FILE
    assert "head -c 32 /dev/urandom" in str(e.value)
    with pytest.raises(ConfigError, match="not set"):
        web.read_token({cfg.SQUALL_HTTP_TOKEN_FILE: None})


def test_read_token_of_an_unreadable_file_names_it(tmp_path):
    missing = str(tmp_path / "nope.token")
    with pytest.raises(ConfigError, match="cannot read .*nope.token"):
        web.read_token({cfg.SQUALL_HTTP_TOKEN_FILE: missing})
    with pytest.raises(ConfigError, match="cannot read"):
        web.read_token({cfg.SQUALL_HTTP_TOKEN_FILE: str(tmp_path)})  # a directory


def test_read_token_refuses_a_short_token_and_strips_the_newline(tmp_path):
    short = token_file(tmp_path, "x" * 15)
    with pytest.raises(ConfigError, match="15 characters; use at least 16"):
        web.read_token({cfg.SQUALL_HTTP_TOKEN_FILE: short})
    assert web.read_token({cfg.SQUALL_HTTP_TOKEN_FILE: token_file(tmp_path)}) == TOKEN
    assert len(web.new_token()) >= 16 and web.new_token() != web.new_token()


# --- loopback -----------------------------------------------------------------------------

@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_hosts(host):
    assert web.loopback(host) is True


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "10.0.0.1", "example.com",
                                  "localhost.example.com"])
def test_non_loopback_hosts(host):
    assert web.loopback(host) is False


# --- WebServer ----------------------------------------------------------------------------

def fetch(url, headers=None):
    """(status, body) of a real GET; an HTTP error status is returned, not raised."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.read()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_web_server_serves_only_requests_with_the_token(tmp_path):
    conf = {cfg.SQUALL_HTTP_TOKEN_FILE: token_file(tmp_path)}
    server = web.WebServer(echo_app, "127.0.0.1", 0, conf, "test")
    try:
        assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}"
        status, body = fetch(server.url + "/x?a=1", {"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and json.loads(body)["path"] == "/x"
        status, body = fetch(server.url + "/x")
        assert status == 401 and "squall.http.token.file" in json.loads(body)["errorMessage"]
    finally:
        server.stop()


def test_login_url_carries_the_token_and_logs_a_browser_in(tmp_path):
    conf = {cfg.SQUALL_HTTP_TOKEN_FILE: token_file(tmp_path)}
    server = web.WebServer(echo_app, "127.0.0.1", 0, conf, "test")
    try:
        url = server.login_url("/logs")
        assert url.startswith(f"{server.url}/logs?token=")
        assert parse_qs(urlsplit(url).query) == {"token": [TOKEN]}
        opener = urllib.request.build_opener(_NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as e:
            opener.open(url, timeout=10)
        with e.value:
            assert e.value.code == 303
            assert e.value.headers["Location"] == "/logs"
            assert e.value.headers["Set-Cookie"].startswith("squall_token=")
    finally:
        server.stop()


def test_login_url_works_with_a_base64_token(tmp_path):
    """The documented recipe (`head -c 32 /dev/urandom | base64`) makes tokens with + / =."""
    token = "ab+cd/ef+gh/ij+kl/mn+op/qr+st=="
    conf = {cfg.SQUALL_HTTP_TOKEN_FILE: token_file(tmp_path, token)}
    server = web.WebServer(echo_app, "127.0.0.1", 0, conf, "test")
    try:
        assert parse_qs(urlsplit(server.login_url()).query) == {"token": [token]}
        # accepted: a redirect with the cookie (a wrong token answers 401 without one)
        opener = urllib.request.build_opener(_NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as e:
            opener.open(server.login_url("/x"), timeout=10)
        with e.value:
            assert e.value.code == 303 and e.value.headers["Location"] == "/x"
            assert e.value.headers["Set-Cookie"].startswith("squall_token=")
        assert fetch(server.url + "/x", {"Authorization": f"Bearer {token}"})[0] == 200
    finally:
        server.stop()


def test_web_server_on_ipv6_loopback_has_a_usable_url(tmp_path):
    """``ui.host: "::1"`` is loopback: served plain, at a URL with the address in brackets."""
    conf = {cfg.SQUALL_HTTP_TOKEN_FILE: token_file(tmp_path)}
    try:
        server = web.WebServer(echo_app, "::1", 0, conf, "test")
    except SquallError:
        pytest.skip("no IPv6 loopback on this host")
    try:
        assert server.url == f"http://[::1]:{server.port}"
        assert server.login_url().startswith(f"http://[::1]:{server.port}/?token=")
        assert fetch(server.url + "/", {"Authorization": f"Bearer {TOKEN}"})[0] == 200
    finally:
        server.stop()


def test_web_server_refuses_plain_http_on_a_non_loopback_address(tmp_path):
    conf = {cfg.SQUALL_HTTP_TOKEN_FILE: token_file(tmp_path)}
    with pytest.raises(SquallError, match="refusing plain HTTP on 0.0.0.0"):
        web.WebServer(echo_app, "0.0.0.0", 0, conf, "ui")
    # the refusal comes first: even without a token file the message is about HTTP
    with pytest.raises(SquallError, match="refusing plain HTTP"):
        web.WebServer(echo_app, "0.0.0.0", 0, {}, "ui")


def test_web_server_on_all_addresses_with_insecure(tmp_path):
    conf = {cfg.SQUALL_HTTP_TOKEN_FILE: token_file(tmp_path)}
    server = web.WebServer(echo_app, "0.0.0.0", 0, conf, "ui", insecure=True)
    try:
        assert server.scheme == "http" and server.url == f"http://127.0.0.1:{server.port}"
        assert fetch(server.url + "/", {"Authorization": f"Bearer {TOKEN}"})[0] == 200
    finally:
        server.stop()


def test_web_server_needs_a_token_file():
    with pytest.raises(ConfigError, match="squall.http.token.file"):
        web.WebServer(echo_app, "127.0.0.1", 0, {}, "ui")


def test_a_taken_port_names_the_address(tmp_path):
    conf = {cfg.SQUALL_HTTP_TOKEN_FILE: token_file(tmp_path)}
    first = web.WebServer(echo_app, "127.0.0.1", 0, conf, "first")
    try:
        with pytest.raises(SquallError, match=f"second: cannot listen on 127.0.0.1:{first.port}"):
            web.WebServer(echo_app, "127.0.0.1", first.port, conf, "second")
        assert fetch(first.url + "/", {"Authorization": f"Bearer {TOKEN}"})[0] == 200
    finally:
        first.stop()


def test_stop_frees_the_port(tmp_path):
    conf = {cfg.SQUALL_HTTP_TOKEN_FILE: token_file(tmp_path)}
    server = web.WebServer(echo_app, "127.0.0.1", 0, conf, "test")
    port = server.port
    server.stop()
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))


def test_off_loopback_the_port_speaks_https_with_the_daemons_certificate(tmp_path):
    """A non-loopback address with squall.tls.* set: HTTPS with the daemon's server
    certificate, which a client trusting the cluster's CA accepts; the token still counts."""
    import ssl

    from squall.deploy.certs import CertificateAuthority

    token = tmp_path / "tok"
    token.write_text("0123456789abcdefghij\n")
    issued = CertificateAuthority(str(tmp_path / "pki")).issue("ui", hosts=["127.0.0.1"],
                                                              server=True)
    conf = {"squall.http.token.file": str(token), **issued.conf()}
    app = lambda environ, start: (start("200 OK", [("Content-Type", "text/plain")]),  # noqa: E731
                                  [b"hello"])[1]
    server = web.WebServer(app, "0.0.0.0", 0, conf, "tls-test")
    try:
        assert server.url.startswith("https://127.0.0.1:")
        ctx = ssl.create_default_context(cafile=conf["squall.tls.ca.file"])
        req = urllib.request.Request(server.url + "/",
                                     headers={"Authorization": "Bearer 0123456789abcdefghij"})
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            assert resp.read() == b"hello"
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(server.url + "/", context=ctx, timeout=10)
        assert e.value.code == 401
        e.value.close()
        plain = urllib.request.Request(server.url.replace("https", "http") + "/")
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(plain, timeout=10).close()
    finally:
        server.stop()


def test_https_keeps_a_browsers_connection_alive_across_requests(tmp_path):
    """A browser sends its second request on the same TLS connection: the header guard could
    not peek at it and its ValueError stopped the port's serve loop (found opening the UI
    over HTTPS in Chromium)."""
    import http.client
    import ssl

    from squall.deploy.certs import CertificateAuthority

    issued = CertificateAuthority(str(tmp_path / "pki")).issue("ui", hosts=["127.0.0.1"],
                                                              server=True)
    conf = {"squall.http.token.file": token_file(tmp_path), **issued.conf()}
    server = web.WebServer(echo_app, "0.0.0.0", 0, conf, "keepalive-test")
    try:
        ctx = ssl.create_default_context(cafile=conf["squall.tls.ca.file"])
        conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
        for i in range(3):
            conn.request("GET", f"/r{i}", headers={"Authorization": f"Bearer {TOKEN}"})
            resp = conn.getresponse()
            assert resp.status == 200 and json.loads(resp.read())["path"] == f"/r{i}"
        conn.close()
        with urllib.request.urlopen(urllib.request.Request(
                server.url + "/after", headers={"Authorization": f"Bearer {TOKEN}"}),
                context=ctx, timeout=10) as resp:
            assert resp.status == 200  # the port still serves
    finally:
        server.stop()


def _trickle(port, n, source="127.0.0.1"):
    """``n`` connections from ``source`` that send half a request's headers, then nothing."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
        s.sendall(b"GET /x HTTP/1.1\r\nHost: a\r\nX-Slow: ")
        socks.append(s)
    return socks


def _closed_by_server(s, within):
    s.settimeout(within)
    try:
        return s.recv(1024) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


@pytest.mark.parametrize("threads", [8, 2])  # the UI's and logviewer's, a /metrics port's
def test_slow_clients_neither_block_others_nor_stay(tmp_path, monkeypatch, threads):
    """Connections that trickle their headers (8 held the UI and logviewer, 2 a /metrics
    port, before any token check) take no thread while they do: a real request is answered
    at once, and each slow one is closed at its header deadline."""
    monkeypatch.setattr(web, "HEADER_SECS", 1.5)
    conf = {cfg.SQUALL_HTTP_TOKEN_FILE: token_file(tmp_path)}
    server = web.WebServer(echo_app, "127.0.0.1", 0, conf, "test", threads=threads)
    # From another address: 32 of them are one address's cap, which would refuse the real
    # request as the 33rd (once the server had accepted them all; the next test's subject).
    slow = _trickle(server.port, 4 * threads, source="127.0.0.2")
    try:
        for _ in range(3):
            status, body = fetch(server.url + "/ok", {"Authorization": f"Bearer {TOKEN}"})
            assert status == 200 and json.loads(body)["path"] == "/ok"
        # Each slow one is cut at its deadline (1.5 s after it connected).
        assert all(_closed_by_server(s, within=5) for s in slow)
        assert fetch(server.url + "/ok", {"Authorization": f"Bearer {TOKEN}"})[0] == 200
    finally:
        for s in slow:
            s.close()
        server.stop()


def test_one_client_holds_a_bounded_number_of_connections(tmp_path, monkeypatch):
    monkeypatch.setattr(web, "MAX_CONNECTIONS_PER_CLIENT", 5)
    conf = {cfg.SQUALL_HTTP_TOKEN_FILE: token_file(tmp_path)}
    server = web.WebServer(echo_app, "127.0.0.1", 0, conf, "test")
    held = _trickle(server.port, 5)
    try:
        extra = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        with extra:
            assert _closed_by_server(extra, within=2)  # closed at accept
        for s in held[:2]:
            s.close()
        # Slots come back as connections close (released by the server when it sees EOF).
        def answered():
            try:
                return fetch(server.url + "/ok", {"Authorization": f"Bearer {TOKEN}"})[0]
            except OSError:
                return None
        import time
        deadline = time.monotonic() + 5
        while answered() != 200:
            assert time.monotonic() < deadline, "no connection slot came back"
            time.sleep(0.05)
    finally:
        for s in held:
            s.close()
        server.stop()
