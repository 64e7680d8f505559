"""Several "hosts" on this one machine, made of Linux network namespaces, for partition and
security tests.

Topology (nothing is added to, or changed in, the root namespace)::

    netns <prefix>h0         netns <prefix>h1         netns <prefix>h2
    lo + eth0 10.213.X.1     lo + eth0 10.213.X.2     lo + eth0 10.213.X.3
         | veth                   | veth                   | veth
       sw-h0 ------------------ sw-h1 ------------------ sw-h2     ports of bridge br0
                         netns <prefix>sw (the "switch")

Each host is a namespace with a loopback and one veth, ``eth0``; the veth's other end is a port of a
bridge in a separate switch namespace. The hosts share one /24 and reach each other only through
that bridge, so one host can be cut off (``link_down``), slowed (``netem``) or listened to
(``capture``) at its switch port without touching the others or the machine's own network.
``<prefix>`` is ``sq<pid>_<k>``: parallel runs, and several ``Hosts`` in one run, never clash.

Usage (needs root and iproute2; ``available()`` says why not, for ``pytest.skip``)::

    import netns

    @pytest.fixture(scope="module")
    def hosts():
        if (reason := netns.available()) is not None:
            pytest.skip(reason)
        with netns.Hosts(3) as hosts:
            yield hosts

    def test_something(hosts):
        server = hosts[0].popen([sys.executable, "server.py", hosts[0].ip],
                                stdout=subprocess.PIPE, text=True)  # prints its port
        port = int(netns.readline(server))
        hosts[2].link_down()                  # partition host 2
        with hosts[1].capture() as cap:       # record host 1's frames
            hosts[1].run([sys.executable, "client.py", hosts[0].ip, str(port)], check=True)
        assert b"secret" not in cap.data

``close()`` (or leaving ``with``) stops every process started through the harness (SIGTERM, then
SIGKILL), then any other process left inside its namespaces, then deletes the namespaces; it also
runs at interpreter exit for a ``Hosts`` left open. Delay and loss need the kernel's netem qdisc
(``netem_available()``), capture needs AF_PACKET sockets (``capture_available()``).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Self

_SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
IP = shutil.which("ip", path=_SBIN_PATH)
TC = shutil.which("tc", path=_SBIN_PATH)
CAPTURE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netns_capture.py")


class NetnsError(RuntimeError):
    """An ``ip`` or ``tc`` command failed, or the harness cannot work here."""


class NetemUnavailable(NetnsError):
    """Delay and loss cannot be emulated here (no ``tc``, or a kernel without sch_netem)."""


def _cmd(argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=30)
    if check and res.returncode != 0:
        raise NetnsError(f"{' '.join(argv)}: {res.stderr.strip() or f'exit {res.returncode}'}")
    return res


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _cmd([IP or "ip", *args], check)


def _tc(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _cmd([TC or "tc", *args], check)


def list_netns() -> list[str]:
    """Names of the machine's named network namespaces (``ip netns list``)."""
    return [line.split()[0] for line in _ip("netns", "list").stdout.splitlines() if line.strip()]


@functools.cache
def _probe() -> tuple[str | None, str | None, str | None]:
    """Why (namespaces, netem, capture) cannot be used here, None where they can. Tried once,
    for real, in a throwaway namespace."""
    if os.geteuid() != 0:
        return ("network namespaces need root",) * 3
    if IP is None:
        return ("iproute2's `ip` is not installed",) * 3
    probe = f"sq{os.getpid()}_probe"
    try:
        _ip("netns", "add", probe)
    except NetnsError as e:
        return (f"the kernel refuses a network namespace: {e}",) * 3
    try:
        try:
            _ip("-n", probe, "link", "add", "name", "pa", "type", "veth", "peer", "name", "pb")
            _ip("-n", probe, "link", "add", "name", "pbr", "type", "bridge")
            _ip("-n", probe, "link", "set", "dev", "pb", "master", "pbr", "up")
            _ip("-n", probe, "link", "set", "dev", "pa", "up")
        except NetnsError as e:
            return (f"veth pairs or bridges unsupported: {e}",) * 3
        if TC is None:
            netem = "iproute2's `tc` is not installed"
        else:
            r = _tc("-n", probe, "qdisc", "add", "dev", "pa", "root", "netem", "delay", "1ms",
                    check=False)
            netem = None if r.returncode == 0 else (
                f"tc netem unsupported (kernel without sch_netem?): {r.stderr.strip()}")
    finally:
        _ip("netns", "del", probe, check=False)
    try:
        # Unbound with protocol 0 it receives nothing: creating it touches no interface.
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0).close()
        capture = None
    except (OSError, AttributeError) as e:
        capture = f"AF_PACKET raw sockets unsupported: {e}"
    return None, netem, capture


def available() -> str | None:
    """None if ``Hosts`` can be made here, else the reason (for ``pytest.skip``)."""
    return _probe()[0]


def netem_available() -> str | None:
    """None if ``Host.netem`` works here, else the reason."""
    return _probe()[1]


def capture_available() -> str | None:
    """None if ``Host.capture`` works here, else the reason."""
    return _probe()[2]


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0, interval: float = 0.02) -> bool:
    """Poll ``predicate`` until it is true (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def readline(proc: subprocess.Popen, timeout: float = 5.0) -> str:
    """The next line of ``proc.stdout`` (a pipe the process writes whole, flushed lines to);
    ``""`` if it exited first. TimeoutError after ``timeout`` seconds without one."""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise TimeoutError(f"pid {proc.pid} wrote no line in {timeout} s")
    return proc.stdout.readline()


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def stop_children(procs: list[subprocess.Popen], grace: float) -> None:
    """SIGTERM, SIGKILL whatever is left after ``grace`` s, reap, close the pipes."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)
        for stream in (p.stdin, p.stdout, p.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _stop_pids(pids: list[int], grace: float) -> None:
    """The same for processes that are not our children (we cannot reap them: poll /proc)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if wait_until(lambda: not any(alive(p) for p in pids), grace):
            return


class Capture:
    """Frames recorded on a host's switch port, in both directions. ``stop()`` (or leaving
    ``with``) ends the recording and fills ``frames``; ``data`` is them all, concatenated."""

    def __init__(self, proc: subprocess.Popen, path: str) -> None:
        self._proc, self._path = proc, path
        self.frames: list[bytes] = []

    def stop(self, timeout: float = 10.0) -> list[bytes]:
        if self._proc.returncode is None:
            self._proc.terminate()  # the script drains what is queued, then exits 0
            _, err = self._proc.communicate(timeout=timeout)
            if self._proc.returncode != 0:
                raise NetnsError(f"capture exited {self._proc.returncode}: {err.strip()}")
            with open(self._path, "rb") as f:
                raw = f.read()
            i = 0
            while i + 4 <= len(raw):
                (n,) = struct.unpack_from("!I", raw, i)
                self.frames.append(raw[i + 4:i + 4 + n])
                i += 4 + n
        return self.frames

    @property
    def data(self) -> bytes:
        return b"".join(self.frames)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Host:
    """One namespace of a ``Hosts``: ``name`` (netns), ``ip``, ``iface`` (its switch-side veth)."""

    def __init__(self, net: Hosts, index: int, ip: str) -> None:
        self.net, self.index, self.ip = net, index, ip
        self.name = f"{net.prefix}h{index}"
        self.iface = f"sw-h{index}"  # in the switch namespace; the host's own end is eth0

    def __repr__(self) -> str:
        return f"Host({self.name!r}, {self.ip})"

    def popen(self, argv: Sequence[str], **kw: Any) -> subprocess.Popen:
        """``subprocess.Popen`` of ``argv`` in this namespace; stopped by ``Hosts.close()``."""
        return self.net._popen(self.name, argv, **kw)

    def run(self, argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess:
        """``subprocess.run`` of ``argv`` in this namespace (default timeout 30 s: a hung
        command fails the test instead of hanging the session)."""
        kw.setdefault("timeout", 30)
        return subprocess.run([IP or "ip", "netns", "exec", self.name, *argv], **kw)

    def _ends(self) -> list[tuple[str, str]]:
        return [(self.name, "eth0"), (self.net.switch, self.iface)]

    def link_down(self) -> None:
        """Partition this host: both ends of its veth down."""
        for ns, dev in self._ends():
            _ip("-n", ns, "link", "set", "dev", dev, "down")

    def link_up(self) -> None:
        for ns, dev in self._ends():
            _ip("-n", ns, "link", "set", "dev", dev, "up")

    def netem(self, delay_ms: float | None = None, loss_pct: float | None = None) -> None:
        """Delay and/or drop this host's packets, both ways: a round trip to it grows by twice
        ``delay_ms``. NetemUnavailable if the kernel cannot."""
        if (reason := netem_available()) is not None:
            raise NetemUnavailable(reason)
        spec = (["delay", f"{delay_ms}ms"] if delay_ms is not None else []) + (
            ["loss", f"{loss_pct}%"] if loss_pct is not None else [])
        if not spec:
            raise ValueError("netem() needs delay_ms or loss_pct")
        for ns, dev in self._ends():
            _tc("-n", ns, "qdisc", "replace", "dev", dev, "root", "netem", *spec)

    def clear_netem(self) -> None:
        if netem_available() is None:
            for ns, dev in self._ends():
                _tc("-n", ns, "qdisc", "del", "dev", dev, "root", check=False)  # none: fine

    def shape(self, rate_kbit: int, latency_ms: int = 500) -> None:
        """Narrow this host's link to ``rate_kbit`` both ways with a token bucket (tbf): a
        slow link made of queueing delay, for kernels without netem. NetnsError if the kernel
        has no tbf either."""
        for ns, dev in self._ends():
            _tc("-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                f"{rate_kbit}kbit", "burst", "4kb", "latency", f"{latency_ms}ms")

    def clear_shape(self) -> None:
        for ns, dev in self._ends():
            _tc("-n", ns, "qdisc", "del", "dev", dev, "root", check=False)  # none: fine

    def capture(self) -> Capture:
        """Start recording every frame on this host's switch port (what an eavesdropper on
        the wire would see); returns once recording has begun."""
        return self.net._capture(self)


_counter = itertools.count()
_open: set[Hosts] = set()


@atexit.register
def _close_open() -> None:
    # A test that crashed past its teardown must not leave namespaces or processes behind.
    for hosts in list(_open):
        hosts.close()


class Hosts:
    """``n`` hosts on one switch (see the module docstring). A context manager; or ``start()``
    and ``close()``. Index it for the hosts: ``hosts[0].ip``."""

    def __init__(self, n: int = 3, prefix: str | None = None) -> None:
        if not 1 <= n <= 250:
            raise ValueError("1 <= n <= 250")
        k = next(_counter)
        self.prefix = prefix or f"sq{os.getpid()}_{k}"
        # Each Hosts has its own switch, so equal subnets could never meet; a distinct one per
        # run only keeps the addresses in captures and logs of parallel runs apart.
        subnet = f"10.213.{(os.getpid() * 7 + k) % 254 + 1}"
        self.subnet = f"{subnet}.0/24"
        self.switch = f"{self.prefix}sw"
        self.hosts = [Host(self, i, f"{subnet}.{i + 1}") for i in range(n)]
        self._made: list[str] = []  # deleted by close(): only ours, never a same-named other
        self._procs: list[subprocess.Popen] = []
        self._tmp: str | None = None
        self._closed = False

    def __getitem__(self, i: int) -> Host:
        return self.hosts[i]

    def __iter__(self) -> Iterator[Host]:
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> Self:
        if self._closed or self._made:
            raise NetnsError("a Hosts starts once")
        if (reason := available()) is not None:
            raise NetnsError(reason)
        _open.add(self)
        try:
            self._tmp = tempfile.mkdtemp(prefix=f"{self.prefix}-")
            self._add_netns(self.switch)
            _ip("-n", self.switch, "link", "add", "name", "br0", "type", "bridge")
            for h in self.hosts:
                self._add_netns(h.name)
                # Both ends are created in their namespaces: no veth ever appears in the root one.
                _ip("-n", h.name, "link", "add", "name", "eth0", "type", "veth",
                    "peer", "name", h.iface, "netns", self.switch)
                _ip("-n", h.name, "addr", "add", f"{h.ip}/24", "dev", "eth0")
                _ip("-n", h.name, "link", "set", "dev", "eth0", "up")
                _ip("-n", self.switch, "link", "set", "dev", h.iface, "master", "br0", "up")
            # STP is off on a new bridge, so its ports forward as soon as they are up.
            _ip("-n", self.switch, "link", "set", "dev", "br0", "up")
        except BaseException:
            self.close()
            raise
        return self

    def _add_netns(self, name: str) -> None:
        _ip("netns", "add", name)
        self._made.append(name)
        _ip("-n", name, "link", "set", "dev", "lo", "up")

    def _popen(self, ns: str, argv: Sequence[str], **kw: Any) -> subprocess.Popen:
        if self._closed or ns not in self._made:
            raise NetnsError(f"{self.prefix} is not started, or closed")
        # `ip netns exec` execs the command in place: proc.pid is the command's own pid.
        proc = subprocess.Popen([IP or "ip", "netns", "exec", ns, *argv], **kw)
        self._procs.append(proc)
        return proc

    def _capture(self, host: Host) -> Capture:
        if (reason := capture_available()) is not None:
            raise NetnsError(reason)
        out = os.path.join(self._tmp or "", f"{host.iface}-{next(_counter)}.frames")
        # In the switch namespace: processes on the host cannot see or disturb the recording.
        proc = self._popen(self.switch, [sys.executable, CAPTURE_SCRIPT, host.iface, out],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            ready = readline(proc, 10) == "ready\n"
        except TimeoutError:
            ready = False
        if not ready:
            proc.kill()
            _, err = proc.communicate(timeout=10)
            raise NetnsError(f"capture on {host.iface} did not start: {err.strip()}")
        return Capture(proc, out)

    def close(self, grace: float = 3.0) -> None:
        """Stop every process started here (SIGTERM, SIGKILL after ``grace`` s), then any
        other left in the namespaces, then delete the namespaces made here. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            stop_children(self._procs, grace)
            # What those started (not ours to reap) would keep a namespace alive, nameless.
            strays = [int(pid) for ns in self._made
                      for pid in _ip("netns", "pids", ns, check=False).stdout.split()]
            _stop_pids(strays, grace)
        finally:
            for ns in reversed(self._made):
                _ip("netns", "del", ns, check=False)
            self._made.clear()
            if self._tmp:
                shutil.rmtree(self._tmp, ignore_errors=True)
            _open.discard(self)
