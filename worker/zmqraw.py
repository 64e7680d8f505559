"""Non-blocking send and receive on a pyzmq socket that keep the GIL.

pyzmq releases the GIL around every send and receive, even one that cannot block. The
event loop receives once per round (most rounds find nothing) and sends a frame per
flush: a release and retake of the GIL every few hundred microseconds. CPython hands the
GIL to a waiting thread only when the holder keeps it a whole switch interval (5 ms)
without letting go, and every release restarts that wait; the loop's waker mostly retakes
the GIL before the waiting thread runs. Under a busy loop, the worker's other threads (a
spout moved to its own thread, the heartbeat, the profiler's sampler) got the GIL a few
times a second: a 2-second CPU profile held 10 samples instead of 200.

The compiled build calls libzmq's own functions with the GIL held, taken from the libzmq
pyzmq loaded: a call that cannot block is as short as the bookkeeping around it, and a
waiting thread gets the GIL within a switch interval again. The source (and a build that
cannot find those functions) uses pyzmq, and asks the socket's events before a receive so
that an empty one, each round's, does not release the GIL.

Errors other than "would block" go through pyzmq's own call, so they are raised as
pyzmq's exceptions with its messages.
"""

from __future__ import annotations

import os

import zmq

try:
    import cython
    _COMPILED = cython.compiled
except ImportError:  # installed without Cython: this source runs as plain Python
    _COMPILED = False

#: libzmq's functions the compiled build calls, in the order sqz_set takes them.
_NAMES = ("zmq_msg_init", "zmq_msg_recv", "zmq_msg_data", "zmq_msg_size", "zmq_msg_close",
          "zmq_send", "zmq_errno", "zmq_version")


def _libzmq_candidates() -> list[str]:
    """Files of this process that may hold libzmq's functions: the libzmq shared library
    pyzmq loaded (a wheel's bundled copy or the system's), else pyzmq's extension itself
    (a build linked statically)."""
    found = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) == 6 and os.path.basename(parts[5].strip()).startswith("libzmq"):
                    path = parts[5].strip()
                    if path not in found:
                        found.append(path)
    except OSError:
        pass
    if not found:
        from zmq.backend.cython import _zmq
        found.append(_zmq.__file__)
    return found


def libzmq_addresses() -> tuple[int, ...] | None:
    """The addresses of :data:`_NAMES` in the one libzmq this process loaded, if it is the
    version pyzmq reports; None otherwise (two copies loaded, hidden symbols, another
    version), and the pyzmq path is used."""
    import ctypes

    candidates = _libzmq_candidates()
    if len(candidates) != 1:
        return None
    try:
        lib = ctypes.CDLL(candidates[0])
        funcs = [getattr(lib, name) for name in _NAMES]
    except (OSError, AttributeError):
        return None
    version = [ctypes.c_int() for _ in range(3)]
    funcs[-1].restype = None
    funcs[-1](*(ctypes.byref(v) for v in version))
    if tuple(v.value for v in version) != zmq.zmq_version_info():
        return None
    return tuple(ctypes.cast(f, ctypes.c_void_p).value for f in funcs)


_RAW = False
if _COMPILED:
    _a = libzmq_addresses()
    _RAW = _a is not None and _sqz_set(_a[0], _a[1], _a[2], _a[3], _a[4], _a[5], _a[6],  # noqa: F821
                                       _a[7]) == 0


def raw() -> bool:
    """True when send and receive call libzmq directly (the compiled build found it)."""
    return _RAW


def recv_nowait(sock: zmq.Socket) -> bytes | None:
    """The socket's next message, or None when none is waiting."""
    if _RAW:
        frame = _sqz_recv(sock.underlying)  # noqa: F821
        if frame is not False:  # False: an error, raised by pyzmq's receive below
            return frame
    elif not sock.get(zmq.EVENTS) & zmq.POLLIN:
        return None
    try:  # a message is waiting, or an error pyzmq raises as its own
        return sock.recv(zmq.NOBLOCK)
    except zmq.Again:
        return None


def send_nowait(sock: zmq.Socket, frame) -> bool:
    """Queue ``frame`` on the socket; False when it would block (the high-water mark)."""
    if _RAW:
        sent = _sqz_send(sock.underlying, frame)  # noqa: F821
        if sent >= 0:
            return bool(sent)
    try:
        sock.send(frame, zmq.NOBLOCK)
    except zmq.Again:
        return False
    return True
