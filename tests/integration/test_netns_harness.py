"""The network-namespace harness (tests/netns.py): hosts reach each other through the switch,
partitions and delays take effect, captures see cleartext, and nothing is left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid

import netns
import pytest

pytestmark = pytest.mark.integration

PY = sys.executable
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# argv: bind address. Prints its port, then echoes every connection, one at a time.
ECHO_SERVER = r"""
import socket, sys
srv = socket.create_server((sys.argv[1], 0))
print(srv.getsockname()[1], flush=True)
while True:
    conn, _ = srv.accept()
    with conn:
        while data := conn.recv(65536):
            conn.sendall(data)
"""

# argv: ip port message rounds timeout. Prints the echo and the fastest round trip in ms.
ECHO_CLIENT = r"""
import socket, sys, time
ip, port, msg = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
rounds, timeout = int(sys.argv[4]), float(sys.argv[5])
with socket.create_connection((ip, port), timeout=timeout) as s:
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for _ in range(rounds):
        t, got = time.perf_counter(), b""
        s.sendall(msg)
        while len(got) < len(msg):
            chunk = s.recv(65536)
            if not chunk:
                sys.exit("connection closed")
            got += chunk
        rtts.append(time.perf_counter() - t)
print(got.decode(), min(rtts) * 1000)
"""

SLEEPER = "import time; print('ready', flush=True); time.sleep(600)"
# Leaves a grandchild the harness never saw: close() must find it in the namespace.
ORPHANING = (
    "import subprocess, sys, time;"
    "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']);"
    "print(c.pid, flush=True); time.sleep(600)"
)


@pytest.fixture(scope="module", autouse=True)
def _need_netns():
    if (reason := netns.available()) is not None:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def hosts(_need_netns):
    with netns.Hosts(3) as hosts:
        yield hosts


def start_echo(host: netns.Host) -> tuple[subprocess.Popen, int]:
    proc = host.popen([PY, "-c", ECHO_SERVER, host.ip], stdout=subprocess.PIPE, text=True)
    return proc, int(netns.readline(proc))


def talk(src: netns.Host, ip: str, port: int, msg: str = "hello", rounds: int = 1,
         timeout: float = 2.0) -> float | None:
    """Echo ``msg`` from ``src`` through the server at ip:port: the fastest round trip in ms,
    or None if the connection failed."""
    r = src.run([PY, "-c", ECHO_CLIENT, ip, str(port), msg, str(rounds), str(timeout)],
                capture_output=True, text=True)
    if r.returncode != 0:
        return None
    echoed, rtt = r.stdout.split()
    assert echoed == msg
    return float(rtt)


def root_network() -> tuple[str, str]:
    links = subprocess.run([netns.IP, "-o", "link", "show"], capture_output=True, text=True,
                           check=True).stdout
    routes = subprocess.run([netns.IP, "route", "show"], capture_output=True, text=True,
                            check=True).stdout
    return " ".join(sorted(line.split(": ")[1] for line in links.splitlines())), routes


def test_hosts_reach_each_other_through_the_switch(hosts):
    server, port = start_echo(hosts[0])
    for client in hosts[1:]:
        assert talk(client, hosts[0].ip, port, f"from-{client.name}") is not None
    # The server is the tracked pid itself (not an `ip` wrapper), inside host 0's namespace.
    ns_inode = os.stat(f"/proc/{server.pid}/ns/net").st_ino
    assert ns_inode == os.stat(f"/run/netns/{hosts[0].name}").st_ino
    assert ns_inode != os.stat("/proc/self/ns/net").st_ino


def test_link_down_partitions_a_host_and_link_up_heals_it(hosts):
    a, b, c = hosts
    _, port_a = start_echo(a)
    _, port_c = start_echo(c)
    assert talk(a, c.ip, port_c) is not None
    c.link_down()
    try:
        assert talk(a, c.ip, port_c, timeout=1.0) is None
        assert talk(b, a.ip, port_a) is not None  # the others are not partitioned
    finally:
        c.link_up()
    assert netns.wait_until(lambda: talk(a, c.ip, port_c) is not None, timeout=10)


def test_netem_delay_shows_in_round_trips(hosts):
    if (reason := netns.netem_available()) is not None:
        pytest.skip(reason)
    a, b = hosts[0], hosts[1]
    _, port = start_echo(b)
    before = talk(a, b.ip, port, rounds=5)
    b.netem(delay_ms=50)
    try:
        during = talk(a, b.ip, port, rounds=5, timeout=5)
    finally:
        b.clear_netem()
    after = talk(a, b.ip, port, rounds=5)
    assert None not in (before, during, after)
    # 50 ms each way on b's link adds ~100 ms to a round trip: at least 50 must show.
    assert during >= before + 45, (before, during)
    assert after < before + 25, (before, after)


def test_netem_without_kernel_support_raises_with_the_reason(hosts):
    if netns.netem_available() is None:
        pytest.skip("netem works here")
    with pytest.raises(netns.NetemUnavailable, match="netem"):
        hosts[0].netem(delay_ms=50)


def test_capture_sees_cleartext_sent_and_nothing_else(hosts):
    if (reason := netns.capture_available()) is not None:
        pytest.skip(reason)
    a, b, c = hosts
    _, port = start_echo(a)
    sent, never = f"SQUALL-MARKER-{uuid.uuid4().hex}", f"SQUALL-MARKER-{uuid.uuid4().hex}"
    with b.capture() as cap, c.capture() as elsewhere:
        assert talk(b, a.ip, port, sent) is not None
    assert cap.data.count(sent.encode()) >= 2  # b's request and a's echo
    assert never.encode() not in cap.data
    # A port records only its own host's traffic (the bridge learned a's and b's MACs by ARP).
    assert sent.encode() not in elsewhere.data


def test_close_kills_every_process_and_deletes_every_namespace():
    before = root_network()
    hs = netns.Hosts(2).start()
    names = [h.name for h in hs] + [hs.switch]
    try:
        assert set(names) <= set(netns.list_netns())
        sleeper = hs[0].popen([PY, "-c", SLEEPER], stdout=subprocess.PIPE, text=True)
        stubborn = hs[1].popen(
            [PY, "-c", f"import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); {SLEEPER}"],
            stdout=subprocess.PIPE, text=True)
        parent = hs[0].popen([PY, "-c", ORPHANING], stdout=subprocess.PIPE, text=True)
        assert netns.readline(sleeper) == netns.readline(stubborn) == "ready\n"
        orphan = int(netns.readline(parent))
        pids = [sleeper.pid, stubborn.pid, parent.pid, orphan]
        assert all(netns.alive(pid) for pid in pids)
    finally:
        hs.close(grace=0.5)
    assert not set(names) & set(netns.list_netns())
    assert not [pid for pid in pids if netns.alive(pid)]
    assert stubborn.returncode == -signal.SIGKILL  # ignored SIGTERM: killed after the grace
    hs.close()  # idempotent
    assert root_network() == before  # the root namespace was never touched


def test_failed_start_deletes_only_what_it_made():
    prefix = f"sq{os.getpid()}_clash"
    taken = f"{prefix}h1"
    subprocess.run([netns.IP, "netns", "add", taken], check=True)
    try:
        with pytest.raises(netns.NetnsError, match=taken):
            netns.Hosts(3, prefix=prefix).start()
        assert [n for n in netns.list_netns() if n.startswith(prefix)] == [taken]
    finally:
        subprocess.run([netns.IP, "netns", "del", taken], check=True)


def test_a_crashing_test_process_leaves_nothing_behind():
    code = ("import netns, sys; hs = netns.Hosts(2).start();"
            f"p = hs[1].popen([sys.executable, '-c', {SLEEPER!r}]);"
            "print(p.pid, *[h.name for h in hs], hs.switch, flush=True);"
            "raise RuntimeError('crash')")
    r = subprocess.run([PY, "-c", code], cwd=TESTS, capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 1 and "RuntimeError: crash" in r.stderr, r.stderr
    pid, *names = r.stdout.split()
    assert len(names) == 3
    assert not set(names) & set(netns.list_netns())
    assert not netns.alive(int(pid))
