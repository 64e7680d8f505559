"""A reliable spout on a Redis stream: one consumer group per topology, at least once.

Each spout task is a consumer of the topology's group (``squall-<topology name>`` unless
given), named after its task index, so a restarted task is the same consumer again:

* it first reads back its own pending entries (``XREADGROUP ... 0``: delivered to it
  before a crash, never acknowledged) and emits them again, then new ones (``>``);
* an entry is emitted with its id as the message id and acknowledged (``XACK``, batched)
  when its tuple tree completes; a failed tree's entry is emitted again from memory, up to
  ``max_retries`` times (then it is acknowledged and dropped, reported as such);
* entries another consumer of the group took and has not acknowledged within the tuple
  timeout (``topology.message.timeout.secs``: a worker killed, a task moved) are claimed
  back with ``XAUTOCLAIM`` and emitted here;
* the group's lag (entries of the stream it has not read yet) and its pending-entries list
  are ``squall_redis_stream_lag`` and ``squall_redis_stream_pending`` gauges, refreshed
  every second, in the REST metrics and Prometheus as Kafka's lag is.

Reads never block the worker's loop: ``XREADGROUP`` without ``BLOCK``; an empty read
returns, and the spout waits as any spout that emitted nothing (Storm's spout wait).
Redis unreachable is reported (at most once a second, naming the address) and retried
at the next call; nothing is lost, since nothing leaves the group unacknowledged.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any, Callable, Sequence

from ...client import config as cfg
from ...client import extras
from ...client.components import Spout

extras.require("redis", "squall.connectors.redis")

import redis  # noqa: E402
from redis.exceptions import RedisClusterException  # noqa: E402

from ..reports import Reports  # noqa: E402
from .config import RedisConfig  # noqa: E402

log = logging.getLogger("squall.connectors.redis")

#: Seconds between two refreshes of the lag gauges.
REFRESH_SECS = 1.0
#: Acknowledgements held for the next read, in batches, before they go on their own.
ACKS_HELD = 4
#: Acks between two looks at the gauges' clock while next_tuple is not called.
REFRESH_EVERY_ACKS = 64


class EntryTranslator:
    """What a stream entry becomes: ``[id, fields]`` (fields as a dict of str), or, given
    ``fields``, those entry fields in that order (a missing one is None)."""

    def __init__(self, fields: Sequence[str] | None = None):
        self.fields = list(fields) if fields else None
        #: The field names of the last entry read by position, and where each of ``fields``
        #: stood among its values: entries of a stream mostly share a layout, so the next
        #: one is read without building a dict.
        self._keys: list | None = None
        self._at: list = []

    def __call__(self, entry_id: str, fields: dict) -> list:
        if self.fields is None:
            return [entry_id, fields]
        return [fields.get(f) for f in self.fields]

    def from_flat(self, entry_id: str, flat: list) -> list:
        """The same values from the entry's fields as Redis sends them, ``[k1, v1, ...]``."""
        if self.fields is None:
            return [entry_id, dict(zip(flat[::2], flat[1::2]))]
        keys = flat[::2]
        if keys == self._keys:  # the layout of the entry before: read by position
            return [flat[p] for p in self._at]
        if len(set(keys)) == len(keys):  # a field twice: the dict's last one, every time
            self._keys = keys
            self._at = [2 * keys.index(f) + 1 if f in keys else None for f in self.fields]
            if None not in self._at:
                return [flat[p] for p in self._at]
            self._keys = None
        return self(entry_id, dict(zip(keys, flat[1::2])))

    def output_fields(self) -> list[str]:
        return self.fields or ["id", "fields"]


class RedisStreamSpout(Spout):
    """Reads ``stream`` through a consumer group, acknowledging an entry once its tuple
    tree completes.

    Example::

        spout = RedisStreamSpout("events", translator=EntryTranslator(["user", "action"]))
        builder.set_spout("events", spout, 2)

    ``config`` is the server (default: the topology's ``trident.redis.*`` keys);
    ``start_id`` where a new group starts ("0": the whole stream, "$": new entries only);
    ``batch`` entries read at once (emitted one a ``next_tuple``, so
    ``topology.max.spout.pending`` holds; the next batch is read ahead while one is emitted)
    and acknowledgements sent at once.
    """

    requires_extras = ("redis",)

    def __init__(self, stream: str, config: RedisConfig | None = None, group: str | None = None,
                 start_id: str = "0", batch: int = 100,
                 translator: Callable[[str, dict], list] | None = None,
                 max_retries: int | None = None):
        if not stream:
            raise ValueError("RedisStreamSpout needs the stream's key")
        if batch < 1:
            raise ValueError(f"batch is entries per read, at least 1, not {batch}")
        self.stream = stream
        self.config = config if config is not None else RedisConfig()
        self.group = group
        self.start_id = start_id
        self.batch = int(batch)
        self.translator = translator if translator is not None else EntryTranslator()
        self.max_retries = max_retries

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(self.translator.output_fields())

    def get_component_configuration(self) -> dict[str, Any]:
        """What the UI's lag endpoint needs (ui/redis_lag.py): the stream, the group and the
        server's settings given here (no password: the topology conf's is used)."""
        out: dict[str, Any] = {cfg.REDIS_STREAM_KEY: self.stream}
        if self.group:
            out[cfg.REDIS_STREAM_GROUP] = self.group
        if self.config.nodes:
            out[cfg.REDIS_STREAM_NODES] = [f"{h}:{p}" for h, p in self.config.nodes]
        for key in (cfg.TRIDENT_REDIS_HOST, cfg.TRIDENT_REDIS_PORT, cfg.TRIDENT_REDIS_DB):
            if key in self.config.given:
                out[key] = self.config.given[key]
        return out

    # -- lifecycle ------------------------------------------------------------------------
    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.component = context.this_component_id
        name = conf.get(cfg.TOPOLOGY_NAME) or "topology"
        self.group = self.group or cfg.redis_stream_group(name)
        self.consumer = f"{self.group}-{context.this_task_index}"
        self.where = self.config.describe(conf)
        self.conf = conf
        #: Made at the first call (a cluster's client connects when made: a cluster that is
        #: down then shows as an error, not as a worker that cannot start).
        self.client: Any = None
        self.timeout_ms = int(float(conf.get(cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS) or 30) * 1000)
        #: Emitted, not yet acked: entry id -> (values, retries so far).
        self.pending: dict[str, tuple[list, int]] = {}
        self.replay: deque[str] = deque()
        #: Read or claimed, not emitted yet (emitted one a call).
        self.buffer: deque[tuple[str, dict]] = deque()
        #: The spout's own connection for reads sent ahead (_send_ahead), whether one is in
        #: flight, and how many acknowledgements went with it.
        self.ahead: Any = None
        self.ahead_sent = False
        self.ahead_acks = 0
        self.acks: list[str] = []
        self.acks_held = ACKS_HELD * self.batch
        #: Acks since the gauges' clock was last looked at (not at every ack: it costs).
        self.acks_since = 0
        #: The translator's reader of fields as Redis sends them: an EntryTranslator's, unless
        #: a subclass of it changed what an entry becomes (its __call__) and not that.
        cls = type(self.translator)
        fast = getattr(cls, "from_flat", None)
        self._from_flat = self.translator.from_flat if fast is not None and (
            cls.__call__ is EntryTranslator.__call__ or fast is not EntryTranslator.from_flat
        ) else None
        #: Reading back this consumer's own pending entries (after a restart) from this id;
        #: None once they are all read and it reads new entries.
        self.own_from: str | None = "0"
        self.group_ready = False
        self.claim_from = "0-0"
        self.next_claim = time.monotonic() + self.timeout_ms / 1000
        self.next_refresh = 0.0
        self.lag = self.pel = 0
        #: One kind: a task's errors share the once-a-second report.
        self.reports = Reports(collector)
        metrics = getattr(context, "metrics", None)
        # The group's figures, the same from every task: the first task alone reports them,
        # so a sum over tasks (Prometheus) counts the group once.
        if metrics is not None and context.this_task_index == 0:
            labels = {"stream": self.stream, "group": self.group}
            metrics.family_gauge("redis_stream_lag", labels, lambda: self.lag)
            metrics.family_gauge("redis_stream_pending", labels, lambda: self.pel)

    def close(self) -> None:
        if self.client is None:
            return
        try:
            self._flush_acks()
        except (redis.RedisError, RedisClusterException) as e:  # read back or claimed later
            log.warning("%s: %d acknowledgements not sent at close: %s", self.component,
                        len(self.acks), e)
        self._drop_ahead()  # a read in flight: its entries wait in this consumer's list
        self.client.close()

    def deactivate(self) -> None:
        try:
            self._flush_acks()
        except (redis.RedisError, RedisClusterException):
            pass  # kept: sent with the next call's

    # -- the spout ------------------------------------------------------------------------
    def next_tuple(self) -> None:
        # One emit a call (the runtime keeps max.spout.pending), from memory while it can:
        # Redis is asked only when the buffer is empty, in one round trip for a batch.
        if self.replay:
            self._replay_one()
            return
        if self._emit_buffered():
            return
        try:
            if self.client is None:
                self.client = self.config.client(self.conf)
            if not self.group_ready:
                self._create_group()
            now = time.monotonic()
            if now >= self.next_refresh:
                self._refresh(now)
            if now >= self.next_claim:
                self.next_claim = now + self.timeout_ms / 2000
                self._claim()
            if not self.buffer:
                self._read()
            self._emit_buffered()
        except (redis.ConnectionError, redis.TimeoutError, RedisClusterException) as e:
            if self.config.nodes:
                self.client = None  # a cluster's client is made again (it learns the slots)
            self._report(f"{self.component}: {self.where} is unreachable ({e}); reading stream "
                         f"{self.stream!r} again at the next call: start Redis or correct "
                         "trident.redis.host/port or the spout's RedisConfig")
        except redis.ResponseError as e:
            if "NOGROUP" in str(e):  # the stream or the group was deleted: made again
                self.group_ready = False
            self._report(f"{self.component}: {self.where} refused a read of stream "
                         f"{self.stream!r} by group {self.group}: {e}")
        except redis.RedisError as e:
            self._report(f"{self.component}: reading stream {self.stream!r} from {self.where} "
                         f"failed: {type(e).__name__}: {e}")

    def ack(self, msg_id: Any) -> None:
        if self.pending.pop(msg_id, None) is not None:
            acks = self.acks
            acks.append(msg_id)
            # Sent with the next read; on their own only when that is slow to come.
            if len(acks) >= self.acks_held:
                try:
                    self._flush_acks()
                except (redis.RedisError, RedisClusterException):
                    pass  # kept: sent with the next call's
        self.acks_since += 1
        if self.acks_since >= REFRESH_EVERY_ACKS:
            self.acks_since = 0
            self._refresh_between_calls()

    def _refresh_between_calls(self) -> None:
        """The gauges also follow while next_tuple is not called (held at max pending)."""
        now = time.monotonic()
        if now >= self.next_refresh and self.group_ready and self.client is not None:
            try:
                self._refresh(now)
            except (redis.RedisError, RedisClusterException):
                pass  # next_tuple reports an unreachable Redis

    def fail(self, msg_id: Any) -> None:
        entry = self.pending.get(msg_id)
        if entry is None:
            return
        values, retries = entry
        if self.max_retries is not None and retries >= self.max_retries:
            del self.pending[msg_id]
            self.acks.append(msg_id)
            self._report(f"{self.component}: entry {msg_id} of stream {self.stream!r} failed "
                         f"{retries + 1} times (max_retries {self.max_retries}); it was "
                         "acknowledged and dropped")
            return
        self.pending[msg_id] = (values, retries + 1)
        self.replay.append(msg_id)
        self._refresh_between_calls()

    # -- the parts ------------------------------------------------------------------------
    def _emit_buffered(self) -> bool:
        """Emit the next buffered entry that needs it; whether one was emitted."""
        buffer = self.buffer
        pending = self.pending
        while buffer:
            entry_id, fields = buffer.popleft()
            if not fields:  # deleted from the stream (XDEL, MAXLEN) after it was delivered
                self.acks.append(entry_id)
                continue
            if entry_id in pending:
                continue  # in flight here already (claimed back from this very consumer)
            if type(fields) is list:  # as read ahead: [k1, v1, ...]
                values = self._from_flat(entry_id, fields) if self._from_flat is not None \
                    else self.translator(entry_id, dict(zip(fields[::2], fields[1::2])))
            else:
                values = self.translator(entry_id, fields)
            pending[entry_id] = (values, 0)
            self.collector.emit(values, msg_id=entry_id)
            return True
        return False

    def _replay_one(self) -> None:
        entry_id = self.replay.popleft()
        entry = self.pending.get(entry_id)
        if entry is not None:
            self.collector.emit(entry[0], msg_id=entry_id)

    def _create_group(self) -> None:
        try:
            self.client.xgroup_create(self.stream, self.group, id=self.start_id, mkstream=True)
            log.info("%s: created consumer group %s of stream %r at %s", self.component,
                     self.group, self.stream, self.start_id)
        except redis.ResponseError as e:
            if "BUSYGROUP" not in str(e):
                raise
        self.group_ready = True

    def _read(self) -> None:
        """The next batch into the buffer, the acknowledgements held so far in the same
        round trip. Reading new entries from one server, the read after it is sent at
        once (:meth:`_send_ahead`): its reply travels while this batch is emitted, so the
        loop does not wait on Redis a round trip a batch."""
        if self.own_from is None and not self.config.nodes:
            if not self.ahead_sent:
                self._send_ahead()
            entries = self._receive_ahead()
            if entries:
                self.buffer.extend(entries)
                self._send_ahead()  # the next batch is on its way meanwhile
            return
        start = self.own_from if self.own_from is not None else ">"
        pipe = self.client.pipeline(transaction=False)
        n_acks = len(self.acks)
        if n_acks:
            pipe.xack(self.stream, self.group, *self.acks)
        pipe.xreadgroup(self.group, self.consumer, {self.stream: start}, count=self.batch)
        try:
            reply = pipe.execute()[-1]
        finally:
            pipe.reset()
        del self.acks[:n_acks]  # sent: kept until then, for a read that fails
        entries = reply[0][1] if reply else []
        if self.own_from is not None:
            if not entries:
                self.own_from = None  # its own history is read: new entries from now on
                return
            self.own_from = entries[-1][0]
        self.buffer.extend(entries)

    def _send_ahead(self) -> None:
        """Send the held acknowledgements and the next read of new entries on the spout's
        own connection, without waiting for the replies."""
        if self.ahead is None:
            self.ahead = self.client.connection_pool.get_connection()
        n = len(self.acks)
        try:
            if n:
                self.ahead.send_command("XACK", self.stream, self.group, *self.acks)
            self.ahead.send_command("XREADGROUP", "GROUP", self.group, self.consumer,
                                    "COUNT", self.batch, "STREAMS", self.stream, ">")
        except BaseException:
            self._drop_ahead()
            raise
        del self.acks[:n]
        self.ahead_acks = n
        self.ahead_sent = True

    def _receive_ahead(self) -> list:
        """The replies of :meth:`_send_ahead`: the entries read, as (id, fields)."""
        self.ahead_sent = False
        try:
            if self.ahead_acks:
                self.ahead.read_response()
            reply = self.ahead.read_response()
        except BaseException:
            self._drop_ahead()
            raise
        self.ahead_acks = 0
        if not reply:
            return []
        # RESP3 answers a map {stream: entries}, RESP2 a list [[stream, entries]]; an entry's
        # fields come as a flat list (None: deleted since it was delivered).
        entries = next(iter(reply.values())) if isinstance(reply, dict) else reply[0][1]
        return entries  # (id, [k1, v1, ...]): translated when emitted (_emit_buffered)

    def _drop_ahead(self) -> None:
        """A failed exchange: the connection's replies are out of step, so it goes. Its
        acknowledgements are lost (their entries are claimed back or read again after a
        restart: at least once) and so is a read in flight (its entries wait in this
        consumer's pending list until claimed)."""
        if self.ahead is not None:
            self.ahead.disconnect()
            self.client.connection_pool.release(self.ahead)
        self.ahead = None
        self.ahead_sent = False
        self.ahead_acks = 0

    def _claim(self) -> None:
        """Entries other consumers have held unacknowledged for the tuple timeout, claimed
        for this one (into the buffer)."""
        reply = self.client.xautoclaim(self.stream, self.group, self.consumer,
                                       min_idle_time=self.timeout_ms, start_id=self.claim_from,
                                       count=self.batch)
        self.claim_from = reply[0] if reply and reply[0] else "0-0"
        entries = reply[1] if reply else []
        for entry_id in (reply[2] if reply and len(reply) > 2 else []):
            self.acks.append(entry_id)  # deleted while pending: nothing to emit
        self.buffer.extend(entries)
        if entries:
            log.info("%s: claimed %d entries of stream %r held too long by other consumers of "
                     "group %s", self.component, len(entries), self.stream, self.group)

    def _flush_acks(self) -> None:
        if self.acks and self.client is not None:
            acks, self.acks = self.acks, []
            try:
                self.client.xack(self.stream, self.group, *acks)
            except BaseException:
                self.acks = acks + self.acks
                raise

    def _refresh(self, now: float) -> None:
        self.next_refresh = now + REFRESH_SECS
        for g in self.client.xinfo_groups(self.stream):
            if g.get("name") == self.group:
                self.pel = int(g.get("pending") or 0)
                lag = g.get("lag")
                self.lag = int(lag) if lag is not None else self.lag
                return

    def _report(self, text: str) -> None:
        self.reports.error("stream", text)
