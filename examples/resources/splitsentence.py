"""Split sentences into words: a bolt on Storm's multi-lang protocol, standard library only.

Squall (or Storm) starts it with this folder as its working directory and talks to it
over stdin/stdout: the handshake, then one tuple per message; every word is emitted
anchored to its sentence and the sentence acked after, as a BasicBolt would. Heartbeat
tuples (stream ``__heartbeat``) are answered with ``sync``. Used by word_count_shell.py
and word_count.yaml.

Storm's JSON lines by default; when the first byte it reads is not ``{`` the worker
speaks msgpack (``topology.multilang.serializer: msgpack``), and it does too: that needs
the msgpack package in the interpreter that runs it (Squall's own Python has it; a
system ``python3`` may not).
"""

import json
import os
import sys


class JsonLines:
    """Storm's JSON serializer: a JSON text, then a line ``end``."""

    def __init__(self, first, stdin, stdout):
        self.pending, self.stdin, self.stdout = first, stdin, stdout

    def read(self):
        lines = [self.pending] if self.pending else []
        self.pending = b""
        for line in self.stdin:
            if line.rstrip(b"\r\n") == b"end":
                return json.loads(b"".join(lines))
            lines.append(line)
        return None

    def write(self, msg):
        self.stdout.write(json.dumps(msg).encode() + b"\nend\n")


class Msgpack:
    """pystorm's msgpack serializer: one msgpack object per message."""

    def __init__(self, first, stdin, stdout):
        import msgpack
        self.packb = msgpack.packb
        self.unpacker = msgpack.Unpacker(raw=False)
        self.unpacker.feed(first)
        self.fd, self.stdout = stdin.fileno(), stdout

    def read(self):
        while True:
            for msg in self.unpacker:
                return msg
            data = os.read(self.fd, 65536)
            if not data:
                return None
            self.unpacker.feed(data)

    def write(self, msg):
        self.stdout.write(self.packb(msg))


def main():
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    first = os.read(stdin.fileno(), 1)
    if first == b"{":
        first += stdin.readline()
        wire = JsonLines(first, stdin, stdout)
    else:
        wire = Msgpack(first, stdin, stdout)
    setup = wire.read()
    pid = os.getpid()
    wire.write({"pid": pid})
    stdout.flush()
    open(os.path.join(setup["pidDir"], str(pid)), "w").close()
    while True:
        msg = wire.read()
        if msg is None:
            return  # the worker went away
        if isinstance(msg, list):
            continue  # task ids: we never ask for them
        if msg["stream"] == "__heartbeat":
            wire.write({"command": "sync"})
        else:
            for word in msg["tuple"][0].split(" "):
                wire.write({"command": "emit", "anchors": [msg["id"]], "tuple": [word],
                            "need_task_ids": False})
            wire.write({"command": "ack", "id": msg["id"]})
        stdout.flush()


if __name__ == "__main__":
    main()
