"""The I/O half of :class:`~squall.connectors.nats.spout.JetStreamSpout`: on the spout's own
event-loop thread, it connects, makes sure of the durable consumer, fetches messages in
batches ahead into a bounded buffer, and sends the acks, naks and terms the spout queues.

The two halves share only thread-safe deques (appends and pops are atomic) and plain
attributes: the spout's thread pops :attr:`Fetcher.buffer` and appends to
:attr:`Fetcher.outbox`; this thread does the reverse and appends what went wrong to
:attr:`Fetcher.errors`, which the spout reports (a collector belongs to the worker's thread).

Acks are fire-and-forget (a publish to the message's reply subject, not the request that
waits for the server's confirmation): an ack lost with the connection leaves the message
unacknowledged, and JetStream delivers it again after ``ack_wait`` -- at least once, as the
spout promises, for a round trip saved per message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any

import nats.errors
import nats.js.errors
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from .loop import connect

log = logging.getLogger("squall.connectors.nats")

#: Seconds a fetch waits on the server for messages before it asks again.
FETCH_WAIT_SECS = 1.0
#: Seconds between two sends of what the spout queued (acks wait at most this long).
SETTLE_EVERY_SECS = 0.02
#: Seconds between two refreshes of the consumer's figures (the gauges).
INFO_EVERY_SECS = 1.0
#: Seconds before connecting, or finding the consumer, is tried again after a failure.
RETRY_SECS = 1.0


class Fetcher:
    """Fetches for one spout task. ``settings`` holds what the consumer is made with."""

    def __init__(self, *, stream: str, durable: str, subject: str | None, options: dict,
                 where: str, ack_wait: float, batch: int, capacity: int,
                 max_deliver: int | None, deliver_policy: str,
                 max_ack_pending: int | None, refresh_info: bool, component: str):
        self.stream, self.durable, self.subject = stream, durable, subject
        self.options, self.where, self.component = options, where, component
        self.ack_wait, self.batch, self.capacity = ack_wait, batch, capacity
        self.max_deliver, self.deliver_policy = max_deliver, deliver_policy
        self.max_ack_pending = max_ack_pending
        self.refresh_info = refresh_info
        #: Fetched, not emitted yet: [message, when fetched or last kept alive].
        self.buffer: deque[list] = deque()
        #: Queued by the spout: (kind, message, nak delay) with kind ack / nak / term.
        self.outbox: deque[tuple[str, Any, float]] = deque()
        #: What went wrong, for the spout to report.
        self.errors: deque[str] = deque(maxlen=100)
        #: The consumer's figures: messages not delivered yet, delivered and unacknowledged.
        self.num_pending = 0
        self.num_ack_pending = 0
        #: Set while the topology is inactive: no fetching (the buffer expires to others).
        self.paused = False
        self.stopping = False
        self.nc: Any = None
        self.sub: Any = None
        #: Once connected: errors nats-py reports from then on are worth passing on (before,
        #: the connect loop reports each failed attempt itself).
        self.connected = False

    # -- the loop's tasks ------------------------------------------------------------------
    async def run(self) -> None:
        """Connect, bind, then fetch until stopped; the settle task runs beside it."""
        settler = asyncio.ensure_future(self._settle_forever())
        try:
            await self._connect()
            await self._bind()
            await self._fetch_forever()
        finally:
            settler.cancel()

    async def shutdown(self) -> None:
        """Send what is queued, then close the connection (its buffer flushed)."""
        self.stopping = True
        if self.nc is None:
            return
        try:
            await self._settle()
            await self.nc.close()  # flushes the acks just written
        except Exception as e:  # unsent acks: those messages are delivered again
            log.warning("%s: closing the NATS connection: %s", self.component, e)

    async def _connect(self) -> None:
        while not self.stopping:
            try:
                self.nc = await connect(
                    self.options, name=f"squall {self.component}",
                    error_cb=self._on_error, disconnected_cb=self._on_disconnect,
                    reconnected_cb=self._on_reconnect)
                self.connected = True
                return
            except Exception as e:  # refused, timed out, no servers, auth
                self.errors.append(
                    f"{self.where} is unreachable ({_text(e)}); reading stream "
                    f"{self.stream!r} again in {RETRY_SECS:g} s: start NATS or correct "
                    "nats.servers or the spout's NatsConfig")
                await asyncio.sleep(RETRY_SECS)

    async def _bind(self) -> None:
        """Make sure of the durable consumer (created, or the existing one taken as it is)
        and bind a pull subscription to it."""
        js = self.nc.jetstream(timeout=max(2.0, self.options["connect_timeout"]))
        config = ConsumerConfig(
            durable_name=self.durable, ack_policy=AckPolicy.EXPLICIT, ack_wait=self.ack_wait,
            max_deliver=self.max_deliver if self.max_deliver is not None else -1,
            deliver_policy=DeliverPolicy(self.deliver_policy), filter_subject=self.subject,
            max_ack_pending=self.max_ack_pending)
        while not self.stopping:
            try:
                try:
                    await js.add_consumer(self.stream, config)
                except nats.js.errors.BadRequestError as e:
                    # The durable exists with other settings (a changed spout): it is used
                    # as it is; the server's settings win until it is deleted.
                    info = await js.consumer_info(self.stream, self.durable)
                    log.warning("%s: consumer %s of stream %r exists with other settings "
                                "(%s); using it as it is: %s", self.component, self.durable,
                                self.stream, e.description, info.config)
                self.sub = await js.pull_subscribe_bind(durable=self.durable, stream=self.stream)
                log.info("%s: bound to consumer %s of stream %r on %s", self.component,
                         self.durable, self.stream, self.where)
                return
            except nats.js.errors.NotFoundError:
                self.errors.append(f"stream {self.stream!r} does not exist on {self.where}; "
                                   f"looking again in {RETRY_SECS:g} s")
            except Exception as e:
                self.errors.append(f"consumer {self.durable} of stream {self.stream!r} on "
                                   f"{self.where} could not be made or bound: {_text(e)}")
            await asyncio.sleep(RETRY_SECS)

    async def _fetch_forever(self) -> None:
        while not self.stopping:
            room = self.capacity - len(self.buffer)
            if self.paused or room < min(self.batch, self.capacity // 2 or 1):
                await asyncio.sleep(SETTLE_EVERY_SECS)  # the spout drains it meanwhile
                continue
            try:
                msgs = await self.sub.fetch(min(self.batch, room), timeout=FETCH_WAIT_SECS)
            except nats.errors.TimeoutError:
                continue  # nothing new within the wait
            except Exception as e:  # connection lost (reconnecting), server restarting
                if not self.stopping:
                    self.errors.append(f"fetching from consumer {self.durable} of stream "
                                       f"{self.stream!r} on {self.where} failed: {_text(e)}")
                    await asyncio.sleep(RETRY_SECS / 4)
                continue
            now = time.monotonic()
            self.buffer.extend([m, now] for m in msgs)

    async def _settle_forever(self) -> None:
        next_info = 0.0
        while True:
            await self._settle()
            now = time.monotonic()
            if not self.paused:
                await self._keep_alive(now)
            if self.refresh_info and self.sub is not None and now >= next_info:
                next_info = now + INFO_EVERY_SECS
                try:
                    info = await self.sub.consumer_info()
                    self.num_pending, self.num_ack_pending = info.num_pending, info.num_ack_pending
                except Exception:  # the fetch loop reports an unreachable server
                    pass
            await asyncio.sleep(SETTLE_EVERY_SECS)

    async def _settle(self) -> None:
        """Send the acks, naks and terms the spout queued."""
        outbox = self.outbox
        while outbox:
            kind, msg, delay = outbox.popleft()
            try:
                if kind == "ack":
                    await msg.ack()
                elif kind == "nak":
                    await msg.nak(delay=delay or None)
                else:
                    await msg.term()
            except Exception as e:  # unsent: JetStream delivers it again after ack_wait
                log.debug("%s: %s of a message not sent: %s", self.component, kind, e)

    async def _keep_alive(self, now: float) -> None:
        """Tell JetStream that buffered messages are still being worked on (``+WPI``), so a
        topology held at max.spout.pending does not see them delivered again to another
        task while they wait here."""
        old = now - self.ack_wait / 2
        for item in list(self.buffer):  # list(): one C call, safe beside the spout's pops
            if item[1] < old:
                try:
                    await item[0].in_progress()
                    item[1] = now
                except Exception:
                    return

    # -- nats-py's callbacks (on this loop) -------------------------------------------------
    async def _on_error(self, e: Exception) -> None:
        if self.connected and not self.stopping:
            self.errors.append(f"{self.where}: {_text(e)}")

    async def _on_disconnect(self) -> None:
        if not self.stopping:
            self.errors.append(f"lost the connection to {self.where}; reconnecting (messages "
                               "not acknowledged are delivered again)")

    async def _on_reconnect(self) -> None:
        log.info("%s: reconnected to %s", self.component, self.where)


def _text(e: BaseException) -> str:
    text = str(e) or getattr(e, "description", "") or ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
