"""The asyncio event loop a NATS component runs nats-py on: a daemon thread of its own.

nats-py is asyncio-only, and the worker's own loop must never wait on NATS (a spout's
``next_tuple`` takes what this thread buffered; a bolt's thread hands it a step and waits
for the step's publish acks). One loop per component instance, started at open/prepare and
stopped at close/cleanup; :meth:`LoopThread.run` and :meth:`LoopThread.submit` are the only
methods other threads call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Coroutine


class LoopThread:
    """A thread running an event loop until :meth:`stop`.

    Example::

        io = LoopThread("nats-spout-3")
        result = io.run(some_coroutine(), timeout=5)
        io.stop()
    """

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            # Whatever is still scheduled is cancelled and let finish, so nothing warns about
            # a task destroyed while pending.
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    def submit(self, coro: Coroutine) -> concurrent.futures.Future:
        """Schedule ``coro`` on the loop (thread-safe); its future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine, timeout: float) -> Any:
        """Run ``coro`` on the loop and wait at most ``timeout`` s for its result (the
        coroutine is cancelled if it takes longer: TimeoutError)."""
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"not done within {timeout:g} s") from None

    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop (its tasks cancelled) and join the thread; idempotent."""
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)


async def connect(options: dict, **callbacks: Any) -> Any:
    """A nats-py connection with ``options`` (:meth:`NatsConfig.options`), or the error of
    the last attempt within the connect timeout. nats-py itself would try for ever (it is
    told to reconnect for ever once connected); the first connection is bounded here, so a
    caller can report an unreachable server and decide when to try again."""
    from nats.aio.client import Client

    nc = Client()
    try:
        await asyncio.wait_for(nc.connect(**options, **callbacks),
                               timeout=options["connect_timeout"] + 0.5)
    except BaseException as e:
        err = nc.last_error or e
        try:
            await nc.close()
        except Exception:
            pass
        if isinstance(e, asyncio.CancelledError):
            raise
        if isinstance(e, asyncio.TimeoutError) and nc.last_error is not None:
            raise err from None
        raise
    return nc
