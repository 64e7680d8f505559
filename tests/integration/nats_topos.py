"""Topologies of the NATS JetStream connector's tests (tests/integration/test_nats_*.py)."""

from __future__ import annotations

from squall.client import BasicBolt, TopologyBuilder
from topos import NumberSpout


class MessageRecorder(BasicBolt):
    """Records each message's stream sequence (``got <seq>``); fails the first attempt of
    the messages whose sequence is a multiple of ``test.fail.every`` (0: none)."""

    def prepare(self, conf, context):
        from topos import Recorder
        self.rec = Recorder(conf, context)
        self.every = int(conf.get("test.fail.every", 0))
        self.failed_once = set()

    def execute(self, tup, collector):
        from squall.client import FailedException
        subject, data, seq = tup.values
        if self.every and seq % self.every == 0 and seq not in self.failed_once:
            self.failed_once.add(seq)
            self.rec("failing", seq)
            raise FailedException(f"failing message {seq} once")
        self.rec("got", seq)

    def declare_output_fields(self, declarer):
        pass


def reader(stream: str, tasks: int = 2, **spout_args) -> TopologyBuilder:
    """JetStreamSpout(stream) -> MessageRecorder."""
    from squall.connectors.nats import JetStreamSpout
    b = TopologyBuilder()
    b.set_spout("messages", JetStreamSpout(stream, batch=50, **spout_args), tasks)
    b.set_bolt("sink", MessageRecorder(), 2).shuffle_grouping("messages")
    return b


def publisher(subject: str, config=None, parallelism: int = 2) -> TopologyBuilder:
    """numbers -> JetStreamBolt: each number published to ``subject`` with its own
    Nats-Msg-Id (so a replay within the duplicate window is stored once)."""
    from squall.connectors.nats import JetStreamBolt, PublishMapper
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 2)
    b.set_bolt("publish", JetStreamBolt(PublishMapper(fixed_subject=subject, payload="n",
                                                      msg_id="n"), config,
                                        timeout_secs=2), parallelism).shuffle_grouping("numbers")
    return b
