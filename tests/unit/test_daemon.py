"""The shared daemon lifecycle: idempotent start and close, a failed start cleans up."""

import threading

import pytest

from squall.client.daemon import Daemon, Status
from squall.client.errors import SquallError


class Recorder(Daemon):
    def __init__(self, fail_with=None):
        super().__init__()
        self.calls = []
        self.fail_with = fail_with

    def start_unsafe(self):
        self.calls.append("start")
        if self.fail_with is not None:
            raise self.fail_with

    def close_unsafe(self, reason):
        self.calls.append(f"close:{reason}")


def test_start_and_close_run_their_hooks_once():
    d = Recorder()
    assert d.start() is d and d.start() is d
    assert d.status is Status.running
    d.close("signal-15")
    d.close("again")
    assert d.calls == ["start", "close:signal-15"]
    assert d.status is Status.closed and d.finished(0)


def test_a_failed_start_closes_and_reraises_the_same_error_naming_the_daemon():
    d = Recorder(fail_with=SquallError("cannot reach ZooKeeper at 127.0.0.1:1"))
    with pytest.raises(SquallError, match="cannot reach ZooKeeper") as info:
        d.start()
    assert "while starting Recorder" in info.value.__notes__
    assert d.calls == ["start", "close:failed to start: cannot reach ZooKeeper at 127.0.0.1:1"]
    assert d.status is Status.failed and d.finished(0)
    d.close()  # nothing more to stop
    assert len(d.calls) == 2
    with pytest.raises(RuntimeError, match="Recorder is failed"):
        d.start()


def test_close_before_start_and_start_after_close():
    d = Recorder()
    d.close("never started")
    assert d.calls == ["close:never started"] and d.status is Status.closed
    with pytest.raises(RuntimeError, match="is closed"):
        d.start()


def test_a_failing_close_hook_still_finishes():
    class Broken(Recorder):
        def close_unsafe(self, reason):
            raise OSError("disk gone")

    d = Broken().start()
    d.close()
    assert d.status is Status.closed and d.finished(0)


def test_finished_waits_for_a_close_from_another_thread():
    d = Recorder().start()
    assert not d.finished(0.01)
    t = threading.Thread(target=d.close, args=("from thread",))
    t.start()
    assert d.finished(5)
    t.join()


def test_context_manager():
    with Recorder() as d:
        assert d.status is Status.running
    assert d.calls == ["start", "close:context exit"]
