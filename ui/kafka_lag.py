"""Kafka spouts' lag for the UI: storm-kafka-monitor's figures, read from the broker.

For each spout whose component configuration names Kafka topics (``config.topics``, as
Storm's KafkaSpout publishes them; client/config.py ``KAFKA_SPOUT_CONF_PREFIX``), the group's
committed offset and the log end of every partition, in Storm's JSON shape
(``TopologySpoutLag``)::

    {"kafka": {"spoutId": "kafka", "spoutType": "KAFKA",
               "spoutLagResult": {"topic": {"0": {"consumerCommittedOffset": 90,
                                                  "logHeadOffset": 100, "lag": 10}}}}}

or ``errorInfo`` in place of ``spoutLagResult`` when the broker cannot be read. Every call
to the broker is bounded, and all of them together by one deadline: a slow or absent broker
makes an ``errorInfo``, never a page that hangs. Needs confluent-kafka (``squall[kafka]``)
on the UI's host.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any, Mapping

from ..client import config as cfg
from ..client.extras import MissingExtra, require
from .spout_lag import LAG_DEADLINE_SECS, LagError, lag_entries, new_deadline, spout_confs

__all__ = ["LAG_DEADLINE_SECS", "kafka_spouts", "topology_lag"]

_P = cfg.KAFKA_SPOUT_CONF_PREFIX
#: Consumer properties the monitor sets itself.
_OWN = {"topics", "topics.pattern", "groupid", "bootstrap.servers"}


def kafka_spouts(topology: Any) -> dict[str, dict]:
    """spout id -> its component configuration, for the spouts that read Kafka
    (``topology`` is a StormTopology message)."""
    return spout_confs(topology, lambda c: _P + "topics" in c or _P + "topics.pattern" in c)


def topology_lag(topology: Any, topology_name: str, topology_conf: Mapping[str, Any],
                 deadline: float | None = None) -> dict[str, dict]:
    """Storm's ``TopologySpoutLag.lag`` for every Kafka spout of ``topology``, read by
    ``deadline`` (monotonic; default LAG_DEADLINE_SECS from now)."""
    end = deadline if deadline is not None else new_deadline()
    return lag_entries(kafka_spouts(topology), "KAFKA", lambda sid, conf: _spout_lag(
        sid, conf, topology_name, topology_conf, end))


def _spout_lag(sid: str, conf: Mapping[str, Any], topology_name: str,
               topology_conf: Mapping[str, Any], deadline: float) -> dict:
    try:
        require("kafka", "the UI's Kafka lag")
    except MissingExtra as e:
        raise LagError(str(e)) from None
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    servers = conf.get(_P + "bootstrap.servers") or topology_conf.get(cfg.KAFKA_BOOTSTRAP_SERVERS)
    if not servers:
        raise LagError(f"spout {sid} names no bootstrap servers and the topology conf no "
                        f"{cfg.KAFKA_BOOTSTRAP_SERVERS}")
    group = conf.get(_P + "groupid") or cfg.kafka_group_id(topology_name, sid)
    props = {k[len(_P):]: v for k, v in conf.items()
             if k.startswith(_P) and k[len(_P):] not in _OWN}
    props.update({"bootstrap.servers": servers, "group.id": group,
                  "enable.auto.commit": False, "client.id": f"squall-ui-lag-{uuid.uuid4().hex[:8]}",
                  # librdkafka's own retries must end within the deadline too
                  "socket.timeout.ms": 3000, "socket.connection.setup.timeout.ms": 3000})

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0.05:
            raise LagError(f"the broker {servers} did not answer within "
                            f"{LAG_DEADLINE_SECS:g} s")
        return remaining

    try:
        consumer = Consumer(props)
    except KafkaException as e:
        raise LagError(f"cannot make a consumer for {servers}: {e}") from None
    try:
        md = consumer.list_topics(timeout=left())
        if _P + "topics" in conf:
            topics = [t for t in str(conf[_P + "topics"]).split(",") if t]
        else:
            pattern = re.compile(str(conf[_P + "topics.pattern"]))
            topics = sorted(t for t in md.topics if pattern.fullmatch(t)
                            and not t.startswith("__"))
        tps = [TopicPartition(t, p) for t in topics if t in md.topics
               for p in sorted(md.topics[t].partitions)]
        committed = {(tp.topic, tp.partition): tp.offset
                     for tp in consumer.committed(tps, timeout=left())} if tps else {}
        result: dict[str, dict] = {}
        for tp in tps:
            _, head = consumer.get_watermark_offsets(tp, timeout=left(), cached=False)
            c = committed.get((tp.topic, tp.partition), -1)
            c = c if c >= 0 else -1
            result.setdefault(tp.topic, {})[str(tp.partition)] = {
                "consumerCommittedOffset": c, "logHeadOffset": head, "lag": head - c}
        return result
    except KafkaException as e:
        raise LagError(f"reading offsets of group {group} from {servers} failed: "
                        f"{e.args[0]}") from None
    finally:
        consumer.close()
