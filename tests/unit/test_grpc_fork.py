"""A Squall process holding live gRPC channels can start subprocesses: with gRPC's fork
support on (grpcio's default), a fork for ``subprocess.Popen(preexec_fn=...)`` (pyspark's
JVM gateway, for one) restarts gRPC's poller in the child, which dies on an epoll
descriptor close_fds already closed, before its exec (grpc/grpc#43055: here 52 of 300
launches failed without Squall's setting). Importing squall turns it off (squall/__init__)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import os, subprocess, sys, threading
    from concurrent import futures
    import squall  # first, as every Squall process imports it before grpc
    import grpc
    assert os.environ["GRPC_ENABLE_FORK_SUPPORT"] == "false"
    server = grpc.server(futures.ThreadPoolExecutor(2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stop = threading.Event()
    def busy():  # calls in flight while the main thread forks
        while not stop.is_set():
            try:
                channel.unary_unary("/squall.Test/Nothing")(b"", timeout=0.05)
            except grpc.RpcError:
                pass
    threads = [threading.Thread(target=busy, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    failed = 0
    for _ in range(150):
        p = subprocess.Popen(["/bin/true"], preexec_fn=lambda: None, stdin=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
        p.stdin.close()
        failed += p.wait() != 0
    stop.set()
    for t in threads:
        t.join(5)
    channel.close()
    server.stop(0)
    print("failed", failed)
""")


def test_subprocesses_start_while_grpc_channels_are_busy():
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # a wedged fork: stop the child and its forks
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError("a subprocess launch wedged beside busy gRPC channels") from None
    assert proc.returncode == 0, stderr[-2000:]
    assert "failed 0" in stdout, (stdout, stderr[-2000:])
