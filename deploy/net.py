"""Free loopback ports for the processes Squall starts on one machine (workers, ZooKeeper, daemons)."""

from __future__ import annotations

import socket


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct TCP ports nothing listens on right now (bound together, then released).

    Another process may still take one before the caller binds it; callers that
    start a server retry on that race.
    """
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def free_port(host: str = "127.0.0.1") -> int:
    """One free TCP port (see :func:`free_ports`)."""
    return free_ports(1, host)[0]
