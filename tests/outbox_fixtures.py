"""What the supervisor outbox's unit tests share: a worker as the outbox reads one, and a
sender that keeps what the outbox sends (or fails, as an unreachable Nimbus would).

``from outbox_fixtures import W, Sender``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class W:
    """A running worker, as supervisor/outbox.py's ``Worker`` protocol describes it."""

    topology_id: str
    port: int
    pid: int
    worker_dir: str
    tasks: tuple


class Sender:
    """The outbox's ``send``: keeps each report; raises while ``fail`` is set; with
    ``max_bytes``, asserts no report is larger."""

    def __init__(self, max_bytes: int | None = None):
        self.sent, self.fail, self.max_bytes = [], False, max_bytes

    def __call__(self, msg):
        if self.fail:
            raise ConnectionError("Nimbus away")
        if self.max_bytes is not None:
            assert msg.ByteSize() <= self.max_bytes
        self.sent.append(msg)
