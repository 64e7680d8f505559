"""Plays a script of multi-lang protocol steps (JSON in $SCRIPT), then answers heartbeats.

Steps, each a list:
  ["send", msg]         write a message (JSON text + "end")
  ["raw", text]         write text as is
  ["read"]              read one message (recorded)
  ["read_tuple"]        read messages until a tuple that is not a heartbeat (recorded)
  ["echo", n, {...}]    n times: read a tuple, emit its values anchored to it (extra emit
                        keys from the dict), ack it
  ["fail"]              read a tuple and fail it
  ["stderr", text]      a line to stderr
  ["sleep", secs]
  ["exit", code]
  ["silent"]            stop answering anything (stay alive, read nothing)
Every message read after the setup is appended to $RECEIVED (JSON lines); the setup
message goes to $SETUP.
After the script: answer heartbeats with sync until end of input.
"""
import json
import os
import sys
import time

received = open(os.environ["RECEIVED"], "a") if os.environ.get("RECEIVED") else None


def read(record=True):
    lines = []
    for line in sys.stdin:
        if line.rstrip("\n") == "end":
            msg = json.loads("".join(lines))
            if received and record:
                received.write(json.dumps(msg) + "\n")
                received.flush()
            return msg
        lines.append(line)
    sys.exit(0)


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\nend\n")
    sys.stdout.flush()


def read_tuple():
    while True:
        msg = read()
        if isinstance(msg, list):
            continue
        if msg.get("stream") == "__heartbeat":
            send({"command": "sync"})
            continue
        return msg


setup = read(record=False)
if os.environ.get("SETUP"):
    with open(os.environ["SETUP"], "w") as fh:
        json.dump(setup, fh)
send({"pid": os.getpid()})
open(os.path.join(setup["pidDir"], str(os.getpid())), "w").close()

for step in json.loads(os.environ.get("SCRIPT", "[]")):
    op = step[0]
    if op == "send":
        send(step[1])
    elif op == "raw":
        sys.stdout.write(step[1])
        sys.stdout.flush()
    elif op == "read":
        read()
    elif op == "read_tuple":
        read_tuple()
    elif op == "echo":  # ["echo", n, {extra emit keys}]
        for _ in range(step[1]):
            t = read_tuple()
            send(dict({"command": "emit", "anchors": [t["id"]], "tuple": t["tuple"]},
                      **(step[2] if len(step) > 2 else {})))
            send({"command": "ack", "id": t["id"]})
    elif op == "fail":  # read a tuple and fail it
        t = read_tuple()
        send({"command": "fail", "id": t["id"]})
    elif op == "stderr":
        print(step[1], file=sys.stderr, flush=True)
    elif op == "sleep":
        time.sleep(step[1])
    elif op == "exit":
        sys.exit(step[1])
    elif op == "silent":
        while True:
            time.sleep(3600)

while True:
    msg = read()
    if isinstance(msg, dict) and msg.get("stream") == "__heartbeat":
        send({"command": "sync"})
