"""CurveZMQ on a worker's sockets: encrypted frames, and only the topology's workers admitted.

Every worker of a topology holds the same key pair (:mod:`squall.client.curve`). Its
inbound socket serves with it (``curve_server``), and a ZAP handler — pyzmq's
``ThreadAuthenticator`` with a callback — admits a connecting peer only if it presents the
topology's public key, which only a holder of the secret can (CurveZMQ proves it in the
handshake). Outbound sockets dial with the pair and expect the same server key.

A peer that fails the handshake (no CURVE at all, another key, garbage) never delivers a
frame; a socket monitor counts each failure, reported with the dropped frames in the
heartbeat and logged (rate limited).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

import zmq
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils.monitor import recv_monitor_message

from ..client.curve import CurveKeys

log = logging.getLogger("squall.worker.curve")

#: The ZAP domain of every serving socket (enforced: no handler, no admission).
ZAP_DOMAIN = "squall"
_FAILED = (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
           | zmq.EVENT_HANDSHAKE_FAILED_AUTH)


class Membership:
    """The topology's key pair on this worker's sockets; one per worker process."""

    def __init__(self, ctx: zmq.Context, keys: CurveKeys, on_refused: Callable[[], None],
                 what: str = ""):
        self.keys = keys
        self.on_refused = on_refused
        self.what = what
        self._auth = ThreadAuthenticator(ctx, log=logging.getLogger("squall.worker.zap"))
        self._auth.start()
        self._auth.configure_curve_callback(ZAP_DOMAIN, credentials_provider=self)
        self._stop = threading.Event()
        self._monitors: list[threading.Thread] = []
        self._last_warn = 0.0

    # ZAP: pyzmq calls this for every CURVE handshake on a serving socket.
    def callback(self, domain: str, client_key: bytes) -> bool:
        return client_key == self.keys.public

    def serve(self, sock: zmq.Socket) -> None:
        """Make ``sock`` (before bind) a CURVE server admitting only the topology's workers."""
        sock.curve_secretkey = self.keys.secret
        sock.curve_publickey = self.keys.public
        sock.curve_server = True
        # Without a ZAP handler libzmq would admit any client that knows the server key:
        # enforce the domain, so a handler that died refuses everyone instead.
        sock.zap_domain = ZAP_DOMAIN.encode()
        sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
        self._watch(sock)

    def dial(self, sock: zmq.Socket) -> None:
        """Make ``sock`` (before connect) a CURVE client of a worker of the topology."""
        sock.curve_secretkey = self.keys.secret
        sock.curve_publickey = self.keys.public
        sock.curve_serverkey = self.keys.public

    def _watch(self, sock: zmq.Socket) -> None:
        mon = sock.get_monitor_socket(_FAILED)
        t = threading.Thread(target=self._count, args=(mon,), daemon=True,
                             name="squall-curve-monitor")
        self._monitors.append(t)
        t.start()

    def _count(self, mon: zmq.Socket) -> None:
        try:
            while not self._stop.is_set():
                if not mon.poll(200):
                    continue
                try:
                    event = recv_monitor_message(mon)
                except zmq.ZMQError:
                    return  # the socket was closed
                if event["event"] & _FAILED:
                    self.on_refused()
                    now = time.monotonic()
                    if now - self._last_warn >= 5.0:
                        self._last_warn = now
                        log.warning("%s refused a connection that failed the CurveZMQ "
                                    "handshake (not a worker of this topology): %s",
                                    self.what, event.get("endpoint", b"").decode(errors="replace"))
        finally:
            mon.close(0)

    def close(self) -> None:
        self._stop.set()
        for t in self._monitors:
            t.join(timeout=2)
        self._auth.stop()
