"""Storm's multi-lang protocol, the transport half: the child process and its wire formats.

:class:`ShellProcess` starts a shell component's child (Storm's ShellProcess), does the
handshake (setup info in, ``{"pid": N}`` out), and reads and writes protocol messages in
one of two formats:

* JSON (Storm's JsonSerializer): each message is one JSON text followed by a line
  ``end``; a message may span lines.
* msgpack (pystorm's MsgpackSerializer): a plain stream of msgpack objects.

The child's stderr goes to the worker log line by line, and its last lines are kept for
the error that ends the worker when the child fails. What each message means to a bolt
or a spout is squall.worker.shell's job.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import signal
import subprocess
import threading
from typing import Any, Mapping

import msgpack

from ..client import grouping as g
from ..client.context import TopologyContext
from ..client.contract import process_start_time
from ..client.shell import MSGPACK, extend_path

#: Lines of a child's stderr kept for the error that ends the worker.
STDERR_TAIL = 20


class ShellError(RuntimeError):
    """The child broke the protocol, exited or went silent: fatal for the worker, as in Storm."""


class _Json:
    """Storm's JSON lines: a JSON text, then ``end`` on a line of its own.

    Read in chunks and split on the ``end`` lines (a JSON text has no raw newline inside
    a string, so a line ``end`` always ends a message): two readline calls a message cost
    more than the JSON decoding. The buffer grows in place and each search starts where
    the last one stopped, so a message of many chunks costs linear time; CRLF lines are
    made LF, a chunk's trailing CR waiting for the next chunk's LF."""

    MARK = b"\nend\n"

    def __init__(self, stdout: Any):
        self.fd = stdout.fileno()
        self.buf = bytearray()
        #: Where the next search for MARK starts in buf.
        self.scan = 0
        self.cr = b""
        self.texts: collections.deque[bytes] = collections.deque()

    @staticmethod
    def encode(msg: Any) -> bytes:
        # ASCII escapes: every adapter reads them whatever the child's locale.
        return json.dumps(msg, default=_json_default).encode("ascii") + _Json.MARK

    def read(self) -> Any:
        texts = self.texts
        buf = self.buf
        while not texts:
            data = os.read(self.fd, 1 << 16)
            if not data:
                raise EOFError(bytes(buf[:200]))
            data, self.cr = self.cr + data, b""
            if b"\r" in data:  # a child writing CRLF lines
                if data.endswith(b"\r"):
                    data, self.cr = data[:-1], b"\r"
                data = data.replace(b"\r\n", b"\n")
            buf += data
            start = 0
            pos = self.scan
            while (i := buf.find(self.MARK, pos)) >= 0:
                texts.append(bytes(buf[start:i]))
                start = pos = i + len(self.MARK)
            if start:
                del buf[:start]
            self.scan = max(0, len(buf) - len(self.MARK) + 1)
        text = texts.popleft()
        try:
            return json.loads(text)
        except ValueError:
            raise ShellError(f"the child wrote something that is not a JSON message: "
                             f"{text[:200]!r}") from None


class _Msgpack:
    """pystorm's msgpack stream: one msgpack object per message, no delimiter."""

    def __init__(self, stdout: Any):
        self.fd = stdout.fileno()
        self.unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)

    @staticmethod
    def encode(msg: Any) -> bytes:
        return msgpack.packb(msg, use_bin_type=True, default=str)

    def read(self) -> Any:
        while True:
            try:
                return next(self.unpacker)
            except StopIteration:
                pass
            except (ValueError, msgpack.UnpackException) as e:
                raise ShellError(f"the child wrote something that is not msgpack: {e}") from None
            data = os.read(self.fd, 1 << 16)
            if not data:
                raise EOFError(b"")
            self.unpacker.feed(data)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).decode("utf-8", "replace")
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    return str(obj)


def _grouping_json(grouping: g.Grouping) -> dict[str, Any]:
    # Storm's Grouping union field names in capitals (TopologyContext.groupingToJSONableMap):
    # ours, but a global grouping is Storm's fields grouping on no fields, and a custom one
    # its custom_object.
    if grouping.kind in (g.FIELDS, g.GLOBAL):
        return {"type": "FIELDS", "fields": list(grouping.fields or ())}
    return {"type": "CUSTOM_OBJECT" if grouping.kind == g.CUSTOM else grouping.kind.upper()}


def context_json(ctx: TopologyContext) -> dict[str, Any]:
    """The handshake's ``context`` (Storm's TopologyContext.toJSONString)."""
    comps = ctx.topology.components
    me = ctx.this_component_id
    targets: dict[str, dict[str, Any]] = {}
    for c in comps.values():
        for inp in c.inputs:
            if inp.component == me:
                targets.setdefault(inp.stream, {})[c.id] = _grouping_json(inp.grouping)
    sources: dict[str, dict[str, Any]] = {}
    source_fields: dict[str, dict[str, list[str]]] = {}
    for inp in comps[me].inputs:
        sources.setdefault(inp.component, {})[inp.stream] = _grouping_json(inp.grouping)
        src = comps.get(inp.component)
        if src is not None and inp.stream in src.streams:
            source_fields.setdefault(inp.component, {})[inp.stream] = \
                list(src.streams[inp.stream].fields)
    streams = comps[me].streams
    return {
        "task->component": {str(t): c for t, c in sorted(ctx.task_to_component().items())},
        "taskid": ctx.this_task_id,
        "componentid": me,
        "stream->target->grouping": targets,
        "streams": sorted(streams),
        "stream->outputfields": {s: list(sd.fields) for s, sd in streams.items()},
        "source->stream->grouping": sources,
        "source->stream->fields": source_fields,
    }


def child_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The worker's environment with the component's over it; PATH is appended to (Storm)."""
    env = {**os.environ, **extra}
    if "PATH" in extra:
        env["PATH"] = extend_path(os.environ.get("PATH", ""), extra)
    return env


class ShellProcess:
    """One child of a shell component task: start, handshake, read, write, stop.

    ``read`` belongs to one thread (the reader) and ``write`` to one at a time (the
    caller serializes); ``stop`` may be called from any thread.
    """

    def __init__(self, argv: list[str], cwd: str | None, env: Mapping[str, str],
                 serializer: str, label: str):
        self.argv = argv
        self.cwd = cwd
        self.env = env
        self.serializer = serializer
        #: "component[task]", for log lines and errors.
        self.label = label
        self.pid: int | None = None
        self.proc: subprocess.Popen | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self._stderr_thread: threading.Thread | None = None
        self._codec: Any = None
        self._pid_started: str | None = None
        self.child_log = logging.getLogger(f"squall.shell.{label}")

    def launch(self, conf: Mapping[str, Any], context: dict[str, Any], pid_dir: str) -> int:
        """Start the child and do the handshake; returns the pid the child reported."""
        try:
            self.proc = subprocess.Popen(self.argv, cwd=self.cwd, env=child_env(self.env),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, close_fds=True)
        except OSError as e:
            where = f" in {self.cwd}" if self.cwd else ""
            raise ShellError(f"cannot start {' '.join(self.argv)!r}{where}: {e}") from None
        self._stderr_thread = threading.Thread(target=self._pump_stderr,
                                               name=f"shell-stderr-{self.label}", daemon=True)
        self._stderr_thread.start()
        codec = _Msgpack if self.serializer == MSGPACK else _Json
        self._codec = codec(self.proc.stdout)
        os.makedirs(pid_dir, exist_ok=True)
        self.write({"conf": dict(conf), "pidDir": pid_dir, "context": context})
        reply = self.read()
        if not isinstance(reply, dict) or not isinstance(reply.get("pid"), int):
            raise ShellError(f"the child's first message must be {{\"pid\": N}}, got {reply!r}"
                             + self.info())
        self.pid = reply["pid"]
        self._pid_started = process_start_time(self.pid)
        return self.pid

    def write(self, msg: Any) -> None:
        self.write_raw(self._codec.encode(msg))

    def write_raw(self, data: bytes) -> None:
        """Write encoded messages (:meth:`encode`); a dead child raises ShellError."""
        stdin = self.proc.stdin  # type: ignore[union-attr]
        try:
            stdin.write(data)
            stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as e:
            if self.wait_exit(1.0) is not None:  # the usual cause: say so, with its exit code
                raise ShellError("the child exited before reading its input" + self.info()) \
                    from None
            raise ShellError(f"cannot write to the child ({e})" + self.info()) from None

    def encode(self, msg: Any) -> bytes:
        return self._codec.encode(msg)

    def read(self) -> Any:
        """The next message; ShellError when the child exits or writes garbage."""
        try:
            return self._codec.read()
        except EOFError as e:
            partial = e.args[0] if e.args else b""
            self.wait_exit(1.0)
            got = f" after a partial message {partial!r}" if partial else ""
            raise ShellError(f"the child's output ended{got} (it exited)" + self.info()) from None
        except (OSError, ValueError) as e:
            raise ShellError(f"cannot read from the child: {e}" + self.info()) from None

    def wait_exit(self, timeout: float) -> int | None:
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def info(self) -> str:
        """What an error about this child should say: pid, command, exit code, stderr tail."""
        code = self.exit_code()
        pid = self.pid or (self.proc.pid if self.proc else None)
        parts = [f"; child {self.label} pid {pid}, command {' '.join(self.argv)!r}"]
        if code is not None:
            parts.append(f", exit code {code}")
        if self._stderr_thread is not None and code is not None:
            self._stderr_thread.join(timeout=0.5)  # its last words
        tail = list(self.stderr_tail)
        if tail:
            parts.append("; its stderr ends:\n  " + "\n  ".join(tail))
        return "".join(parts)

    def _pump_stderr(self) -> None:
        stream = self.proc.stderr  # type: ignore[union-attr]
        try:
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                self.stderr_tail.append(line)
                self.child_log.info("%s", line)
        except (OSError, ValueError):
            pass

    def stop(self, grace: float = 1.0) -> None:
        """SIGTERM (Storm's destroy), SIGKILL after ``grace``; the program the child reported
        too. Not by closing its stdin first: that waits behind a writer stuck on a full pipe.
        The pipes stay open for threads still reading them: :meth:`close_pipes` after."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            if self.wait_exit(grace) is None:
                proc.kill()
                self.wait_exit(grace)
        self._kill_reported()

    def close_pipes(self) -> None:
        """Close our ends of the dead child's pipes (once no thread reads or writes them)."""
        proc = self.proc
        if proc is None:
            return
        if self._stderr_thread is not None:
            self._stderr_thread.join(timeout=1.0)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            try:
                pipe.close()  # type: ignore[union-attr]
            except (OSError, ValueError):
                pass

    def kill(self) -> None:
        """SIGKILL the child, and the program it reported if that is another process (a
        wrapper script's): killing only the wrapper would leave the program holding the
        pipes, and the host waiting for an end of input that never comes."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self._kill_reported()

    def _kill_reported(self) -> None:
        pid = self.pid
        if not pid or self.proc is None or pid == self.proc.pid:
            return
        if process_start_time(pid) != self._pid_started:  # gone, and the pid maybe reused
            return
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
