"""Edge ids that name a tuple the same way every time it is replayed.

Storm draws every edge id at random: a replayed spout message makes new tuples, and a
stateful bolt cannot tell a replay of a tuple it already saved from a new one, which
makes Storm's checkpointing at-least-once. With ``topology.state.checkpoint.mode:
acker`` Squall derives the edge ids instead (root ids stay random, so a late ack of an
abandoned attempt never touches the replay's tree):

* a spout tuple's edge is a hash of (component, task, stream, message id) and the copy's
  index among the emit's target tasks; and of a number drawn when the spout opens,
  unless it declares ``stable_message_ids`` (its ids name messages across its restarts);
* a bolt's emit anchored to tuple ``a`` gets a hash of ``(key(a), a.ack_val)``: ``ack_val``
  is the XOR of the edges ``a`` already handed out, so the first, second... copy differ.

A deterministic bolt therefore emits the same edges when a message is replayed, and a
stateful task recognises a tuple by :func:`tuple_key` (worker/dedupe.py). The edges stay
as good as random for the acker's XOR: a 64-bit mix of distinct inputs. Every worker of a
topology must run the same Python (CPython's tuple hash is part of the derivation).
"""

from __future__ import annotations

from hashlib import blake2b
from typing import Any

import msgpack

_M = (1 << 64) - 1


def mix(x: int) -> int:
    """MurmurHash3's 64-bit finalizer: a bijection of 64-bit ints that spreads every bit."""
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & _M
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & _M
    return x ^ (x >> 33)


def message_base(component: str, task: int, stream: str, msg_id: Any, run: int = 0) -> int:
    """The seed of a spout message's edges: the same in every process, and in every run of
    the spout task when ``run`` is 0 (else a number drawn when the spout opened)."""
    try:
        raw = msgpack.packb([component, task, stream, msg_id, run], use_bin_type=True)
    except (TypeError, ValueError, OverflowError):
        raise TypeError(
            f"spout {component!r} emitted msg_id {msg_id!r:.60} ({type(msg_id).__name__}), "
            "which exactly-once checkpointing (topology.state.checkpoint.mode: acker) cannot "
            "name: use a str, int, bytes or a list of them, or choose acker-at-least-once"
        ) from None
    return int.from_bytes(blake2b(raw, digest_size=8).digest(), "little")


def spout_edge(base: int, copy: int) -> int:
    """The edge of copy number ``copy`` (0, 1...) of a spout emit seeded ``base``."""
    return mix((base + copy) & _M)


def tuple_key(ids: dict) -> int:
    """What names a tracked tuple across replays: its edge id (a tuple in one tree), or a
    mix of its edges in order (a tuple anchored to several trees)."""
    if len(ids) == 1:
        for e in ids.values():
            return e
    k = 0
    for e in sorted(ids.values()):
        k = mix(k ^ e)
    return k


def child_edge(anchor_key: int, ack_val: int) -> int:
    """The edge of the next copy anchored to the tuple named ``anchor_key`` that has handed
    out edges XORing to ``ack_val``. CPython's tuple hash (xxHash's mixing) is the fastest
    good mix at hand, and the same in every process: ints are not hash-randomized."""
    return hash((anchor_key, ack_val)) & _M
