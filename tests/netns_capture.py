"""Record every frame crossing one network interface; run inside a namespace by tests/netns.py.

Usage: ``python netns_capture.py IFACE OUTFILE``

Prints ``ready`` once the socket is bound (frames from then on are recorded), then appends each
frame to OUTFILE as a 4-byte big-endian length followed by the frame's bytes, until SIGTERM or
SIGINT. Frames already queued on the socket when the signal comes are still written, so whatever
crossed the interface before the signal is in the file when the process exits.
"""

from __future__ import annotations

import signal
import socket
import struct
import sys

ETH_P_ALL = 0x0003


def main(iface: str, out: str) -> None:
    stopping = False

    def stop(_signum, _frame) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # Protocol 0 receives nothing until bound: no frame of another interface can slip in.
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0) as sock, open(out, "wb") as f:
        sock.bind((iface, ETH_P_ALL))  # CPython applies htons() itself
        sock.settimeout(0.05)  # how often the stop flag is looked at
        print("ready", flush=True)
        while not stopping:
            try:
                frame = sock.recv(1 << 18)  # GSO frames on a veth can exceed the MTU
            except TimeoutError:
                continue
            f.write(struct.pack("!I", len(frame)) + frame)
        sock.setblocking(False)
        while True:
            try:
                frame = sock.recv(1 << 18)
            except BlockingIOError:
                break
            f.write(struct.pack("!I", len(frame)) + frame)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
