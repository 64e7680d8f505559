"""The versioned wire frame workers exchange over ZeroMQ, and the tuple value codec.

A frame is one msgpack array ``[VERSION, KIND, ...]``:

* ``[1, GROUPED, [[dest_task, src_task, stream, [values, ...], pairs, several], ...]]`` --
  a batch of tuples for tasks of the receiving worker, grouped by destination, source
  task and stream (what workers send; a channel's order kept across streams). ``pairs``
  holds each tuple of one tree's root and edge ids as two little-endian 64-bit integers
  (16 bytes per tuple, 0 0 for an untracked one; ``None``: none is tracked); ``several``
  maps the index of a tuple in several trees to its ids map (root id -> edge id), or is
  ``None``. The stream and the task ids travel once per group, and a receiver builds no
  list, str, int or dict per tuple to read them.
* ``[1, DATA, [[dest_task, src_task, stream, values, ids], ...]]`` -- the same batch one
  entry per tuple: what workers sent before GROUPED, still read.
* ``[1, BACKPRESSURE, worker_id, congested]`` -- a worker's congestion flag.
* ``[1, HELLO, worker_id, reply]`` -- start-up handshake: a worker's spouts
  start only once it has heard from every peer (Storm waits for all worker
  connections before activating spouts); ``reply`` is false on the first
  greeting, which the peer answers with ``reply`` true.
* ``[1, LOAD, worker_id, {task: load}]`` -- the load of the sender's tasks, in
  thousandths (0-1000), for load-aware shuffles (Storm's load metrics messages).

Values msgpack cannot encode travel as ext types: the topology's registered
serializers, or pickle where allowed (:mod:`squall.client.values`). Decoding is
strict: anything that is not a well-formed frame raises :class:`BadFrame` so
the receiver can drop and count it; a value this worker will not decode (a
pickle it does not accept, an unknown ext type) is refused without running it.
"""

from __future__ import annotations

import msgpack

from ..client.values import PLAIN, BadValue, ValueTypes

try:
    import cython
    _COMPILED = cython.compiled
except ImportError:  # installed without Cython: this source runs as plain Python
    _COMPILED = False

VERSION = 1
DATA = 0
BACKPRESSURE = 1
HELLO = 2
LOAD = 3
GROUPED = 4

#: ZeroMQ high-water mark (frames) of each worker-to-worker pipe, on both ends. Small, so
#: a peer that stops reading fills it quickly and the sender reports congestion.
PIPE_HWM = 128


class BadFrame(ValueError):
    """A frame that is not a well-formed Squall frame; it is dropped."""


class Codec:
    """Encodes and decodes frames; one per thread (msgpack Packer is not thread-safe)."""

    def __init__(self, values: ValueTypes = PLAIN):
        self._packer = msgpack.Packer(default=values.default, use_bin_type=True)

    def data(self, tuples: list) -> bytes:
        return self._packer.pack([VERSION, DATA, tuples])

    def grouped(self, groups: list) -> bytes:
        if _COMPILED:  # the same bytes, written by frame.pxd's C for the usual values
            frame = _pack_grouped(groups)  # noqa: F821
            if frame is not None:
                return frame
        return self._packer.pack([VERSION, GROUPED, groups])

    def backpressure(self, worker_id: str, congested: bool) -> bytes:
        return self._packer.pack([VERSION, BACKPRESSURE, worker_id, bool(congested)])

    def hello(self, worker_id: str, reply: bool) -> bytes:
        return self._packer.pack([VERSION, HELLO, worker_id, bool(reply)])

    def load(self, worker_id: str, loads: dict[int, int]) -> bytes:
        return self._packer.pack([VERSION, LOAD, worker_id, loads])


def decode(frame: bytes, values: ValueTypes = PLAIN) -> list:
    """Decode one frame; raises :class:`BadFrame` for anything malformed.

    Ext values decode through ``values``: the topology's registered types, and pickle
    only where :class:`~squall.client.values.ValueTypes` allows it.
    """
    # A GROUPED frame of the usual values: frame.pxd's C reads it (None: msgpack does).
    msg = _unpack_grouped(frame) if _COMPILED else None  # noqa: F821
    if msg is None:
        try:
            msg = msgpack.unpackb(frame, raw=False, strict_map_key=False,
                                  ext_hook=values.ext_hook)
        except BadValue as exc:
            raise BadFrame(str(exc)) from None
        except Exception as exc:
            raise BadFrame(f"not msgpack: {type(exc).__name__}: {exc}") from None
    if type(msg) is not list or len(msg) < 3:
        raise BadFrame(f"not a frame array: {type(msg).__name__}")
    if msg[0] != VERSION:
        raise BadFrame(f"unsupported frame version {msg[0]!r} (this worker speaks {VERSION})")
    kind = msg[1]
    if kind == DATA or kind == GROUPED:
        if type(msg[2]) is not list:
            raise BadFrame("data frame without a tuple list")
    elif kind in (BACKPRESSURE, HELLO):
        if len(msg) != 4 or type(msg[2]) is not str or type(msg[3]) is not bool:
            raise BadFrame("malformed control frame")
    elif kind == LOAD:
        if len(msg) != 4 or type(msg[2]) is not str or type(msg[3]) is not dict or not all(
                type(t) is int and type(v) is int and 0 <= v <= 1000
                for t, v in msg[3].items()):
            raise BadFrame("malformed load frame")
    else:
        raise BadFrame(f"unknown frame kind {kind!r}")
    return msg
