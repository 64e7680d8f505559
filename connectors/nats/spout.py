"""A reliable spout on a NATS JetStream stream: one durable pull consumer per topology, at
least once. No Storm module reads NATS; this one follows storm-kafka-client's spout where
the two systems meet.

Every task of the spout binds a pull subscription to the same durable consumer
(``squall-<topology name>`` unless given), so JetStream shares the stream's messages
between them and remembers what was acknowledged across restarts and resubmissions:

* the consumer acknowledges explicitly, with ``ack_wait`` = the topology's
  ``topology.message.timeout.secs``: what a killed worker had fetched and not acknowledged
  is delivered again, to whichever task fetches next, once that time has passed;
* a message is emitted with its stream sequence as the message id, and acknowledged
  (``+ACK``) when its tuple tree completes;
* a failed tree's message is given back with ``-NAK`` (after ``retry_delay_secs``), so
  JetStream delivers it again -- to any task -- and counts the delivery; once it has been
  delivered ``max_deliver`` times a failure terminates it (``+TERM``: never again) and
  reports it. Counting and redelivering stay JetStream's, the one place that sees every
  task, rather than each task's memory (as the Redis stream spout re-emits its own);
* a message the translator cannot turn into values is terminated and reported with its
  subject and sequence (the same bytes would fail the same way on every redelivery);
* the consumer's ``num_pending`` (not delivered yet) and ``num_ack_pending`` (delivered,
  unacknowledged) are the ``squall_nats_consumer_pending`` and
  ``squall_nats_consumer_ack_pending`` gauges, refreshed every second by the first task.

nats-py runs on an event loop of the spout's own (:mod:`.loop`), which fetches batches
ahead into a bounded buffer (:mod:`.fetcher`); ``next_tuple`` only takes from that buffer,
so the worker's loop never waits on NATS. NATS unreachable is reported (at most once a
second, naming the servers) and tried again; nothing is lost, since nothing is
acknowledged before its tree completes.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from ...client import config as cfg
from ...client import extras
from ...client.components import Spout

extras.require("nats", "squall.connectors.nats")

from ..reports import Reports  # noqa: E402
from .config import NatsConfig, check_name, durable_name  # noqa: E402
from .message import Message, MessageTranslator  # noqa: E402

log = logging.getLogger("squall.connectors.nats")

#: JetStream's deliver policies a new consumer may start with.
DELIVER_POLICIES = ("all", "new", "last", "last_per_subject")


class JetStreamSpout(Spout):
    """Reads ``stream`` (only ``subject`` of it, a filter with wildcards, when given)
    through a durable pull consumer, acknowledging a message once its tuple tree completes.

    Example::

        spout = JetStreamSpout("ORDERS", subject="orders.eu.>",
                               translator=MessageTranslator(["subject", "data"]))
        builder.set_spout("orders", spout, 2)

    ``config`` is the server (default: the topology's ``nats.servers``); ``durable`` the
    consumer's name (default ``squall-<topology>``); ``deliver_policy`` where a new consumer
    starts ("all": the whole stream, "new": messages from now on, "last",
    "last_per_subject"); ``batch`` messages fetched at once (emitted one a ``next_tuple``,
    so ``topology.max.spout.pending`` holds; at most two batches wait in the buffer);
    ``max_deliver`` deliveries before a failing message is terminated (None: no limit);
    ``retry_delay_secs`` how long JetStream waits before delivering a failed message again;
    ``max_ack_pending`` the consumer's bound on unacknowledged messages over all tasks
    (None: the server's default, 1,000 -- keep it above tasks x max.spout.pending).
    """

    requires_extras = ("nats",)

    def __init__(self, stream: str, subject: str | None = None,
                 config: NatsConfig | None = None, durable: str | None = None,
                 deliver_policy: str = "all", batch: int = 100,
                 translator: Callable[[Message], list] | None = None,
                 max_deliver: int | None = None, retry_delay_secs: float = 0.0,
                 max_ack_pending: int | None = None):
        check_name(stream, "stream")
        if durable is not None:
            check_name(durable, "durable consumer")
        if deliver_policy not in DELIVER_POLICIES:
            raise ValueError(f"deliver_policy {deliver_policy!r}: one of {DELIVER_POLICIES}")
        if batch < 1:
            raise ValueError(f"batch is messages per fetch, at least 1, not {batch}")
        if max_deliver is not None and max_deliver < 1:
            raise ValueError(f"max_deliver is at least 1 (None: no limit), not {max_deliver}")
        if retry_delay_secs < 0:
            raise ValueError("retry_delay_secs must be 0 or more")
        self.stream = stream
        self.subject = subject
        self.config = config if config is not None else NatsConfig()
        self.durable = durable
        self.deliver_policy = deliver_policy
        self.batch = int(batch)
        self.translator = translator if translator is not None else MessageTranslator()
        self.max_deliver = max_deliver
        self.retry_delay_secs = float(retry_delay_secs)
        self.max_ack_pending = max_ack_pending

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(self.translator.output_fields())

    # -- lifecycle ------------------------------------------------------------------------
    def open(self, conf: Any, context: Any, collector: Any) -> None:
        from .fetcher import Fetcher
        from .loop import LoopThread

        self.collector = collector
        self.component = context.this_component_id
        self.durable = self.durable or durable_name(conf.get(cfg.TOPOLOGY_NAME) or "topology")
        self.where = self.config.describe(conf)
        self.ack_wait = float(conf.get(cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS) or 30)
        #: Emitted, tree not complete: stream sequence -> the client's message (its reply
        #: subject is where the ack goes).
        self.pending: dict[int, Any] = {}
        #: One kind: a task's errors share the once-a-second report.
        self.reports = Reports(collector)
        first = context.this_task_index == 0
        self.fetcher = Fetcher(
            stream=self.stream, durable=self.durable, subject=self.subject,
            options=self.config.options(conf), where=self.where, ack_wait=self.ack_wait,
            batch=self.batch, capacity=2 * self.batch, max_deliver=self.max_deliver,
            deliver_policy=self.deliver_policy, max_ack_pending=self.max_ack_pending,
            refresh_info=first, component=f"{self.component}:{context.this_task_id}")
        self.io = LoopThread(f"nats-spout-{self.component}-{context.this_task_id}")
        self._running = self.io.submit(self.fetcher.run())
        self._running.add_done_callback(self._fetcher_ended)
        metrics = getattr(context, "metrics", None)
        # The consumer's figures, the same from every task: the first task alone reports
        # them, so a sum over tasks (Prometheus) counts the consumer once.
        if metrics is not None and first:
            labels = {"stream": self.stream, "consumer": self.durable}
            f = self.fetcher
            metrics.family_gauge("nats_consumer_pending", labels, lambda: f.num_pending)
            metrics.family_gauge("nats_consumer_ack_pending", labels, lambda: f.num_ack_pending)

    def _fetcher_ended(self, future: Any) -> None:
        """Only close ends the fetcher; anything else is a bug worth a report (the spout
        then emits nothing more, and its messages go to the other tasks after ack_wait)."""
        if not future.cancelled() and future.exception() is not None and \
                not self.fetcher.stopping:
            e = future.exception()
            log.error("%s: the NATS fetcher stopped", self.component, exc_info=e)
            self.fetcher.errors.append(f"the NATS fetcher stopped: {type(e).__name__}: {e}")

    def close(self) -> None:
        io = getattr(self, "io", None)
        if io is None:
            return
        try:
            io.run(self.fetcher.shutdown(), timeout=5.0)
        except Exception as e:  # not sent: those messages are delivered again
            log.warning("%s: closing: %s", self.component, e)
        io.stop()

    def activate(self) -> None:
        self.fetcher.paused = False

    def deactivate(self) -> None:
        # No more fetching; what waits in the buffer is no longer kept alive, so after
        # ack_wait JetStream gives it to whichever task fetches (this one, reactivated).
        self.fetcher.paused = True

    # -- the spout ------------------------------------------------------------------------
    def next_tuple(self) -> None:
        errors = self.fetcher.errors
        if errors:
            self._report_errors()
        buffer = self.fetcher.buffer
        # Older than this, JetStream has (or is about to have) given it to another task.
        stale = time.monotonic() - 0.9 * self.ack_wait
        while buffer:
            msg, kept_at = buffer.popleft()
            if kept_at < stale:
                continue
            if self._emit(msg):
                return

    def ack(self, msg_id: Any) -> None:
        msg = self.pending.pop(msg_id, None)
        if msg is not None:
            self.fetcher.outbox.append(("ack", msg, 0.0))
        if self.fetcher.errors:
            self._report_errors()

    def fail(self, msg_id: Any) -> None:
        msg = self.pending.pop(msg_id, None)
        if msg is None:
            return
        delivered = msg.metadata.num_delivered
        if self.max_deliver is not None and delivered >= self.max_deliver:
            self.fetcher.outbox.append(("term", msg, 0.0))
            self._report(f"{self.component}: message {msg_id} ({msg.subject}) of stream "
                         f"{self.stream!r} failed on each of its {delivered} deliveries "
                         f"(max_deliver {self.max_deliver}); it was terminated (+TERM)")
            return
        self.fetcher.outbox.append(("nak", msg, self.retry_delay_secs))

    # -- the parts ------------------------------------------------------------------------
    def _emit(self, msg: Any) -> bool:
        """Emit a fetched message; whether it was emitted."""
        meta = msg.metadata
        seq = meta.sequence.stream
        if seq in self.pending:
            # Delivered again while its tree is still in flight here (it outlived
            # ack_wait): that tree's ack goes to the newer delivery.
            self.pending[seq] = msg
            return False
        try:
            values = self.translator(Message(
                subject=msg.subject, data=msg.data, sequence=seq, stream=meta.stream,
                headers=dict(msg.headers or {}), delivered=meta.num_delivered))
        except Exception as e:  # the user's translator: that message, not the worker
            self.fetcher.outbox.append(("term", msg, 0.0))
            self._report(f"{self.component}: message {seq} ({msg.subject}) of stream "
                         f"{self.stream!r} does not translate to a tuple: "
                         f"{type(e).__name__}: {e}; it was terminated (+TERM)")
            return False
        self.pending[seq] = msg
        self.collector.emit(values, msg_id=seq)
        return True

    def _report_errors(self) -> None:
        # The latest says most (a failed connect logs a disconnect, then why it failed).
        errors = self.fetcher.errors
        n = len(errors)
        last = errors[-1]
        for _ in range(n):
            errors.popleft()
        self.reports.error("spout", f"{self.component}: {last}", skipped=n - 1)

    def _report(self, text: str) -> None:
        self.reports.error("spout", text)
