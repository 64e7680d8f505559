"""A bolt that publishes each tuple to NATS JetStream and acks it on the publish
acknowledgement (storm-kafka-client's ``KafkaBolt`` with acks=all, for JetStream).

Each input tuple becomes one message, its subject, payload and optional ``Nats-Msg-Id``
header from the bolt's :class:`~squall.connectors.nats.message.PublishMapper`. The bolt
takes a whole executor step of tuples (``execute_batch``), publishes them all at once and
then waits for all their PubAcks (pipelined: one round trip a step, not a tuple); a tuple is
acked once the stream stored its message and failed -- its spout replays it -- when
JetStream refused it, no stream took the subject, or no PubAck came within ``timeout_secs``.

A replayed tuple is published again. Given ``msg_id`` in the mapper (a stable id from the
tuple), JetStream stores a message whose ``Nats-Msg-Id`` it has seen within the stream's
duplicate window (``duplicate_window``, two minutes by default) only once: a timed-out
publish that did land, then replayed, is not stored twice.

Errors are reported, at most once a second per kind, naming the subject or the servers: a
tuple the mapper cannot map (failed), a publish JetStream refused (failed), NATS
unreachable (every tuple of the step failed, replayed once it is back).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ...client import config as cfg
from ...client import extras
from ...client.components import Bolt
from ...client.stateful import failures_rewind
from ...client.tuple import Tuple

extras.require("nats", "squall.connectors.nats")

import nats.errors  # noqa: E402
import nats.js.errors  # noqa: E402

from ..reports import Reports  # noqa: E402
from .config import NatsConfig  # noqa: E402
from .message import PublishMapper  # noqa: E402

log = logging.getLogger("squall.connectors.nats")


def _text(e: BaseException) -> str:
    if isinstance(e, nats.js.errors.APIError):
        return f"{e.description} (error code {e.err_code})"
    if isinstance(e, nats.js.errors.NoStreamResponseError):
        return "no stream takes this subject"
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


class JetStreamBolt(Bolt):
    """Publishes each tuple to JetStream, acking it once the stream has stored it.

    Example::

        bolt = JetStreamBolt(PublishMapper(subject=lambda t: f"counts.{t['word']}",
                                           payload="count"))

    ``config`` is the server (default: the topology's ``nats.servers``); ``stream``, when
    given, is the stream the messages must land in (JetStream refuses them otherwise);
    ``timeout_secs`` how long a step waits for its PubAcks.
    """

    #: The hosts running it need nats-py (a cluster without it refuses the topology).
    requires_extras = ("nats",)

    def __init__(self, mapper: PublishMapper, config: NatsConfig | None = None,
                 stream: str | None = None, timeout_secs: float = 5.0):
        if timeout_secs <= 0:
            raise ValueError("timeout_secs must be above 0")
        self.mapper = mapper
        self.config = config if config is not None else NatsConfig()
        self.stream = stream
        self.timeout_secs = float(timeout_secs)

    def get_component_configuration(self) -> dict[str, Any]:
        # A thread of its own: each step waits for its PubAcks (and an unreachable server
        # for its connect timeout); on the worker's shared loop either would hold every
        # other executor of the worker.
        return {cfg.TOPOLOGY_EXECUTOR_THREADED: True}

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        from .loop import LoopThread

        self.collector = collector
        self.component = context.this_component_id
        self.where = self.config.describe(conf)
        self.options = self.config.options(conf)
        self.io = LoopThread(f"nats-bolt-{self.component}")
        self.nc: Any = None
        self.js: Any = None
        self.reports = Reports(collector, drop_bad=failures_rewind(conf, context))

    def cleanup(self) -> None:
        io = getattr(self, "io", None)
        if io is None:
            return
        if self.nc is not None:
            try:
                io.run(self.nc.close(), timeout=5.0)
            except Exception:
                pass
        io.stop()

    def execute(self, tup: Tuple) -> None:
        self.execute_batch([tup])

    def execute_batch(self, tuples: list) -> None:
        work = []  # (tuple, subject, payload, headers)
        for tup in tuples:
            if tup.is_tick:
                continue
            subject = None
            try:
                subject = self.mapper.subject(tup)
                work.append((tup, subject, self.mapper.payload(tup), self.mapper.headers(tup)))
            except Exception as e:  # the user's mapper too: that tuple fails, not the worker
                shown = f"subject {subject!r}" if subject is not None else "no subject"
                self.reports.bad_tuple(tup, "mapping", f"{self.component}: a tuple from "
                                       f"{tup.component} ({shown}) does not map to a NATS "
                                       f"message: {_text(e)}")
        if not work:
            return
        try:
            results = self.io.run(self._publish(work), timeout=self._step_bound())
        except Exception as e:  # not connected, or the loop gone
            return self._step_failed([w[0] for w in work], e)
        for (tup, subject, _, _), result in zip(work, results):
            if isinstance(result, BaseException):
                self._report("publish", f"{self.component}: {self.where} did not store the "
                             f"message for subject {subject!r}: {_text(result)}; the tuple "
                             "was failed")
                self.collector.fail(tup)
            else:
                self.collector.ack(tup)

    def _step_bound(self) -> float:
        """The longest a step may take: a connect, then the PubAcks' wait."""
        return self.options["connect_timeout"] + 1.0 + self.timeout_secs + 1.0

    async def _publish(self, work: list) -> list:
        """Publish every message of the step, then wait for all their PubAcks; each one's
        PubAck or error, in order."""
        from .loop import connect

        if self.nc is None or self.nc.is_closed:
            self.nc = await connect(self.options, name=f"squall {self.component}")
            self.js = self.nc.jetstream(timeout=self.timeout_secs)
        futures = []
        try:
            for _, subject, payload, headers in work:
                futures.append(await self.js.publish_async(
                    subject, payload, headers=headers, stream=self.stream,
                    wait_stall=self.timeout_secs))
        except BaseException:  # the step fails whole: free the slots of those sent
            for f in futures:
                f.cancel()
            raise
        done, not_done = await asyncio.wait(futures, timeout=self.timeout_secs)
        for f in not_done:
            f.cancel()  # frees its slot among nats-py's pending publishes
        out = []
        for f in futures:
            if f in not_done:
                out.append(TimeoutError(f"no PubAck within {self.timeout_secs:g} s"))
            else:
                out.append(f.exception() or f.result())
        return out

    def _step_failed(self, tuples: list, e: BaseException) -> None:
        """NATS could not take the step: every tuple of it fails (and replays)."""
        if isinstance(e, nats.errors.AuthorizationError):
            what = (f"{self.where} refused the bolt's credentials: correct the NatsConfig's "
                    "user/password or token")
        else:
            what = (f"{self.where} is unreachable ({_text(e)}): start NATS or correct "
                    "nats.servers or the bolt's NatsConfig")
        self._report("unavailable", f"{self.component}: {what}; the step's {len(tuples)} "
                     "tuple(s) were failed and will be replayed")
        for tup in tuples:
            self.collector.fail(tup)

    def _report(self, kind: str, text: str) -> None:
        self.reports.error(kind, text)
