"""The user-facing component interfaces: :class:`Spout`, :class:`Bolt`, :class:`BasicBolt`.

Storm's ISpout / IBolt / IBasicBolt in Python style. A component object is
pickled into the topology at build time and unpickled once per task in the
worker, so ``__init__`` runs on the client and ``open``/``prepare`` run in the
worker: keep sockets and files out of ``__init__``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .tuple import DEFAULT_STREAM, Tuple


class OutputFieldsDeclarer:
    """Collects the streams a component declares in ``declare_output_fields``."""

    def __init__(self) -> None:
        #: stream id -> (field names, direct?)
        self.streams: dict[str, tuple[list[str], bool]] = {}

    def declare(self, fields: Sequence[str], direct: bool = False,
                stream: str = DEFAULT_STREAM) -> None:
        """Declare the default stream (or ``stream``) with these field names."""
        self.declare_stream(stream, fields, direct)

    def declare_stream(self, stream: str, fields: Sequence[str], direct: bool = False) -> None:
        """Declare a named output stream; ``direct=True`` makes it a direct stream."""
        if isinstance(fields, str):
            fields = [fields]
        self.streams[stream] = ([str(f) for f in fields], bool(direct))


class Component:
    """Shared base: output declaration and per-component configuration."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """Declare output streams with ``declarer.declare([...])``. Default: none."""

    def get_component_configuration(self) -> Mapping[str, Any] | None:
        """Component-level conf merged over the topology conf (Storm's getComponentConfiguration)."""
        return None


class Spout(Component):
    """A source of tuples. Storm's ISpout.

    Example::

        class Sentences(Spout):
            def open(self, conf, context, collector):
                self.collector = collector
                self.i = 0
            def next_tuple(self):
                self.i += 1
                self.collector.emit(["the cow jumped"], msg_id=self.i)
            def declare_output_fields(self, declarer):
                declarer.declare(["sentence"])

    ``next_tuple``, ``ack`` and ``fail`` are all called from one thread, so a
    spout needs no locks of its own. ``next_tuple`` should return quickly; when
    it has nothing to emit it just returns and the runtime backs off.
    """

    #: True when a message id names the same message across this spout's restarts (a
    #: Kafka offset, a line number of a file re-read from its start). Exactly-once acker
    #: checkpointing then recognises what a restarted spout emits again; with False (ids
    #: that start over, as a counter from 0 does) it recognises replays within one run of
    #: the spout only, and a restarted spout's messages count as new.
    stable_message_ids = False

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def next_tuple(self) -> None:
        raise NotImplementedError

    def ack(self, msg_id: Any) -> None:
        """The tuple tree rooted at the tuple emitted with ``msg_id`` completed."""

    def fail(self, msg_id: Any) -> None:
        """The tuple tree failed or timed out; a reliable spout re-emits the message."""

    def activate(self) -> None:
        """Called when the topology becomes active; ``next_tuple`` calls follow."""

    def deactivate(self) -> None:
        """Called when the topology is deactivated; ``next_tuple`` is not called until ``activate``."""

    def close(self) -> None:
        """Called when the worker shuts down (not guaranteed on kill -9)."""


class Bolt(Component):
    """A processing step. Storm's IRichBolt: anchoring and acking are up to you.

    Every input tuple must be acked or failed exactly once
    (``self.collector.ack(t)``), or its tree times out.
    """

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Tuple) -> None:
        raise NotImplementedError

    def flush_before_checkpoint(self, txid: int) -> None:
        """Barrier checkpointing (``topology.state.checkpoint.mode: barrier``) calls it
        before checkpoint ``txid``'s barrier leaves this task, every tuple before the barrier
        executed. A bolt that holds executed tuples back (a sink writing in batches) writes
        them now, so the checkpoint covers them; a tuple it fails starts a recovery (no
        acker replays it: the spouts rewind to the last checkpoint). Under the acker it is
        not called: held tuples are not acked, and replay."""

    # A bolt may define ``execute_batch(self, tuples)`` instead of (or beside) ``execute``:
    # the executor then hands it every tuple it drains in one step (up to 256, in arrival
    # order; tick tuples too, one per call), amortizing the call. Acking stays per tuple:
    # ack or fail each one. Not defined here so the executor can tell who has it.

    def cleanup(self) -> None:
        """Called when the worker shuts down (not guaranteed on kill -9)."""


class BasicBolt(Component):
    """A bolt whose emits are anchored to the input and whose input is acked for you.

    Raise :class:`~squall.client.errors.FailedException` from ``execute`` to
    fail the input instead. Storm's IBasicBolt.
    """

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        pass

    def execute(self, tup: Tuple, collector: Any) -> None:
        raise NotImplementedError

    def cleanup(self) -> None:
        pass
