"""The KafkaSpout's message ids around the widest offset an int id holds: the short emit path
and the full one must give the same id for a record, and ack must find it (no broker: the
consumer is never asked for records, the records are handed to the spout)."""

from __future__ import annotations

import pytest

pytest.importorskip("confluent_kafka")

from squall.connectors.kafka import KafkaSpout, KafkaSpoutConfig  # noqa: E402
from squall.connectors.kafka.offsets import ACKED  # noqa: E402
from squall.connectors.kafka.spout import _OFFSET_MASK  # noqa: E402


class _Ctx:
    this_component_id = "kafka"
    this_task_id = 1
    this_task_index = 0
    topology_id = "ids-1-1"

    def component_tasks(self, component):
        return [1]


class _Collector:
    def __init__(self):
        self.sent = []

    def emit(self, values, stream="default", msg_id=None):
        self.sent.append((values[2], msg_id))

    def get_pending_count(self):
        return 0

    def report_error(self, error):  # "brokers are down": there is none, by design
        pass


class _Msg:
    def __init__(self, offset):
        self._offset = offset

    def error(self):
        return None

    def topic(self):
        return "t"

    def partition(self):
        return 0

    def offset(self):
        return self._offset

    def key(self):
        return None

    def value(self):
        return b"v"

    def timestamp(self):
        return 0, 0

    def headers(self):
        return None


def test_offsets_past_the_int_id_width_get_tuple_ids_and_are_acked():
    first = _OFFSET_MASK - 1
    spout = KafkaSpout(KafkaSpoutConfig("127.0.0.1:1", topics=["t"], props={"log_level": 0},
                                        request_timeout_secs=0.2))
    out = _Collector()
    spout.open({}, _Ctx(), out)
    try:
        spout._apply_assignment([("t", 0)], {("t", 0): (first, None)})
        part = spout.parts[("t", 0)]
        spout.waiting.extend(_Msg(o) for o in range(first, first + 4))
        assert spout._emit_waiting(64, 0.0) == 4
        ids = dict(out.sent)
        assert isinstance(ids[_OFFSET_MASK], int)
        assert ids[_OFFSET_MASK + 1] == ("t", 0, _OFFSET_MASK + 1)  # would alias another id
        assert len(set(ids.values())) == 4
        for offset, msg_id in out.sent:
            spout.ack(msg_id)
            assert part.offsets.state(offset) == ACKED
    finally:
        spout.refresher.stop()
        spout.consumer.close()
