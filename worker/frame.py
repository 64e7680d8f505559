"""The versioned wire frame workers exchange over ZeroMQ, and the tuple value codec.

A frame is one msgpack array ``[VERSION, KIND, ...]``:

* ``[1, DATA, [[dest_task, src_task, stream, values, ids], ...]]`` -- a batch of
  tuples for tasks of the receiving worker; ``ids`` is ``None`` (untracked) or
  a map root id -> edge id.
* ``[1, BACKPRESSURE, worker_id, congested]`` -- a worker's congestion flag.
* ``[1, HELLO, worker_id, reply]`` -- start-up handshake: a worker's spouts
  start only once it has heard from every peer (Storm waits for all worker
  connections before activating spouts); ``reply`` is false on the first
  greeting, which the peer answers with ``reply`` true.

Values msgpack cannot encode travel as pickled ext type :data:`EXT_PICKLE`
when the pickle fallback is on (Storm's Java-serialization fallback).
Decoding is strict: anything that is not a well-formed frame raises
:class:`BadFrame` so the receiver can drop and log it.
"""

from __future__ import annotations

import pickle
from typing import Any

import msgpack

from ..client.errors import SerializationError

VERSION = 1
DATA = 0
BACKPRESSURE = 1
HELLO = 2

EXT_PICKLE = 1
#: ZeroMQ high-water mark (frames) of each worker-to-worker pipe, on both ends. Small, so
#: a peer that stops reading fills it quickly and the sender reports congestion.
PIPE_HWM = 128
#: Frames larger than this are refused by the receiving socket (a peer never sends one).
MAX_FRAME_BYTES = 256 * 1024 * 1024


class BadFrame(ValueError):
    """A frame that is not a well-formed Squall frame; it is dropped."""


def _pickle_default(obj: Any) -> msgpack.ExtType:
    try:
        return msgpack.ExtType(EXT_PICKLE, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception as exc:
        raise SerializationError(f"tuple value of type {type(obj).__name__} cannot be "
                                 f"serialized: {exc}") from None


def _strict_default(obj: Any) -> Any:
    raise SerializationError(
        f"tuple value of type {type(obj).__name__} cannot be sent to another worker: msgpack "
        "handles None, bool, int, float, str, bytes, list and dict; set "
        "topology.fall.back.on.java.serialization: true to pickle other types")


def _ext_hook(code: int, data: bytes) -> Any:
    if code == EXT_PICKLE:
        return pickle.loads(data)
    raise BadFrame(f"unknown ext type {code}")


def _no_pickle_hook(code: int, data: bytes) -> Any:
    if code == EXT_PICKLE:
        raise BadFrame("pickled value refused: topology.fall.back.on.java.serialization is off")
    raise BadFrame(f"unknown ext type {code}")


class Codec:
    """Encodes and decodes frames; one per thread (msgpack Packer is not thread-safe)."""

    def __init__(self, pickle_fallback: bool = True):
        self._packer = msgpack.Packer(default=_pickle_default if pickle_fallback
                                      else _strict_default, use_bin_type=True)

    def data(self, tuples: list) -> bytes:
        return self._packer.pack([VERSION, DATA, tuples])

    def backpressure(self, worker_id: str, congested: bool) -> bytes:
        return self._packer.pack([VERSION, BACKPRESSURE, worker_id, bool(congested)])

    def hello(self, worker_id: str, reply: bool) -> bytes:
        return self._packer.pack([VERSION, HELLO, worker_id, bool(reply)])


def decode(frame: bytes, allow_pickle: bool = True) -> list:
    """Decode one frame; raises :class:`BadFrame` for anything malformed.

    With ``allow_pickle`` off, a frame carrying a pickled value is refused
    (never unpickled): a topology that does not use the fallback gives a peer
    no way to make this worker run pickle.
    """
    try:
        msg = msgpack.unpackb(frame, raw=False, strict_map_key=False,
                              ext_hook=_ext_hook if allow_pickle else _no_pickle_hook)
    except BadFrame:
        raise
    except Exception as exc:
        raise BadFrame(f"not msgpack: {type(exc).__name__}: {exc}") from None
    if type(msg) is not list or len(msg) < 3:
        raise BadFrame(f"not a frame array: {type(msg).__name__}")
    if msg[0] != VERSION:
        raise BadFrame(f"unsupported frame version {msg[0]!r} (this worker speaks {VERSION})")
    kind = msg[1]
    if kind == DATA:
        if type(msg[2]) is not list:
            raise BadFrame("data frame without a tuple list")
    elif kind in (BACKPRESSURE, HELLO):
        if len(msg) != 4 or type(msg[2]) is not str or type(msg[3]) is not bool:
            raise BadFrame("malformed control frame")
    else:
        raise BadFrame(f"unknown frame kind {kind!r}")
    return msg
