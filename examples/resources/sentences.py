"""A reliable sentence spout on Storm's multi-lang protocol, standard library only.

Emits ``sentences.total`` sentences of ten words (0: endless), sentence i with message
id i, and emits a failed one again; answers every command with ``sync`` as the spout
protocol asks. Used by word_count.yaml (Flux).
"""

import json
import os
import sys
import time

WORDS = ("the cow jumped over the moon an apple a day keeps the doctor away four score "
         "and seven years ago snow white and the seven dwarfs i am at two with nature").split()


def read_message(stdin):
    lines = []
    for line in stdin:
        if line.rstrip("\r\n") == "end":
            return json.loads("".join(lines))
        lines.append(line)
    return None


def send(stdout, msg):
    stdout.write(json.dumps(msg) + "\nend\n")


def sentence(i):
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(10))


def main():
    stdin, stdout = sys.stdin, sys.stdout
    setup = read_message(stdin)
    pid = os.getpid()
    send(stdout, {"pid": pid})
    stdout.flush()
    open(os.path.join(setup["pidDir"], str(pid)), "w").close()
    total = int(setup["conf"].get("sentences.total", 10000))
    ctx = setup["context"]
    mine = sorted(int(t) for t, c in ctx["task->component"].items() if c == ctx["componentid"])
    step, nxt = len(mine), mine.index(ctx["taskid"])
    replay = []
    while True:
        msg = read_message(stdin)
        if msg is None:
            return
        if isinstance(msg, list):
            continue  # task ids: never asked for
        command = msg["command"]
        if command == "next":
            for _ in range(10):  # a small burst per next: one sync, ten sentences
                if replay:
                    i = replay.pop()
                elif total == 0 or nxt < total:
                    i, nxt = nxt, nxt + step
                else:
                    time.sleep(0.001)  # nothing to emit: the protocol leaves the pause to us
                    break
                send(stdout, {"command": "emit", "id": i, "tuple": [sentence(i)],
                              "need_task_ids": False})
        elif command == "fail":
            replay.append(msg["id"])
        send(stdout, {"command": "sync"})
        stdout.flush()


if __name__ == "__main__":
    main()
