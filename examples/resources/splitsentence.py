"""Split sentences into words: a bolt on Storm's multi-lang protocol, standard library only.

Squall (or Storm) starts it with this folder as its working directory and talks JSON
over stdin/stdout: the handshake, then one tuple per message; every word is emitted
anchored to its sentence and the sentence acked after, as a BasicBolt would. Heartbeat
tuples (stream ``__heartbeat``) are answered with ``sync``. Used by word_count_shell.py.
"""

import json
import os
import sys


def read_message(stdin):
    """One message: JSON lines up to a line 'end'. None at end of input."""
    lines = []
    for line in stdin:
        if line.rstrip("\r\n") == "end":
            return json.loads("".join(lines))
        lines.append(line)
    return None


def send(stdout, msg):
    stdout.write(json.dumps(msg) + "\nend\n")


def main():
    stdin, stdout = sys.stdin, sys.stdout
    setup = read_message(stdin)
    pid = os.getpid()
    send(stdout, {"pid": pid})
    stdout.flush()
    open(os.path.join(setup["pidDir"], str(pid)), "w").close()
    while True:
        msg = read_message(stdin)
        if msg is None:
            return  # the worker went away
        if isinstance(msg, list):
            continue  # task ids: we never ask for them
        if msg["stream"] == "__heartbeat":
            send(stdout, {"command": "sync"})
        else:
            for word in msg["tuple"][0].split(" "):
                send(stdout, {"command": "emit", "anchors": [msg["id"]], "tuple": [word],
                              "need_task_ids": False})
            send(stdout, {"command": "ack", "id": msg["id"]})
        stdout.flush()


if __name__ == "__main__":
    main()
