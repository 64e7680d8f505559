"""The Kafka spout's pure decisions, by event tables: what may be committed (Storm's
OffsetManager), when a failed record is retried (KafkaSpoutRetryExponentialBackoff), which
partitions a task owns (RoundRobinManualPartitioner), and the config's refusals."""

from __future__ import annotations

import tracemalloc

import pytest

from event_table import calls, play
from squall.connectors.kafka import (ByTopicRecordTranslator, DefaultRecordTranslator,
                                     KafkaConfigError, KafkaRecord, KafkaSpoutConfig, KafkaTuple,
                                     ProcessingGuarantee, RetryBackoff, SimpleRecordTranslator)
from squall.connectors.kafka.offsets import (ACKED, EMITTED, NOT_EMITTED, PartitionOffsets,
                                             RetrySchedule, assign_round_robin)


def test_only_the_contiguous_run_of_acked_offsets_is_committed():
    p = PartitionOffsets(committed=100)
    play(calls(p), [
        (("next_commit_offset",), None),
        (("emitted", 100), None),
        (("emitted", 101), None),
        (("emitted", 102), None),
        (("acked", 102), True),
        (("next_commit_offset",), None),      # 100 and 101 still in flight
        (("acked", 100), True),
        (("next_commit_offset",), 101),       # 101 holds the rest back
        (("acked", 100), False),              # a duplicate ack changes nothing
        (("acked", 101), True),
        (("next_commit_offset",), 103),
        (("committed", 103), None),
        (("next_commit_offset",), None),
        (("state", 102), ACKED),              # below the commit: done with
        (("emitted", 103), None),
        (("state", 103), EMITTED),
        (("state", 104), NOT_EMITTED),
    ], after=lambda i: _valid(p))
    assert p.uncommitted == 1


def test_offsets_never_emitted_are_stepped_over_when_the_next_emitted_one_is_acked():
    # Compacted records, transaction markers, aborted records under read_committed: the
    # consumer never returns those offsets, as Storm's OffsetManager allows.
    p = PartitionOffsets(committed=0)
    play(calls(p), [
        (("emitted", 0), None),
        (("emitted", 3), None),    # 1 and 2 are not in the log
        (("emitted", 4), None),
        (("acked", 3), True),
        (("next_commit_offset",), None),   # 0 is in flight
        (("acked", 0), True),
        (("next_commit_offset",), 4),      # over 1 and 2, to 3 inclusive
        (("acked", 4), True),
        (("next_commit_offset",), 5),
        (("committed", 5), None),
    ], after=lambda i: _valid(p))
    assert p.uncommitted == 0 and len(p.states) == 0


def test_emit_next_takes_only_the_next_offset_and_leaves_any_other_to_the_full_path():
    # The spout's short path: the next offset in line is marked at once; anything else
    # (a retry, a gap, an offset below the window) changes nothing and goes through
    # state() and emitted().
    p = PartitionOffsets(committed=100)
    play(calls(p), [
        (("emit_next", 100), True),           # the committed offset opens the window
        (("emit_next", 101), True),
        (("emit_next", 101), False),          # in flight: a retry decides, not this
        (("emit_next", 103), False),          # a gap: emitted() steps over it
        (("emit_next", 99), False),           # below the commit: never again
        (("state", 101), EMITTED),
        (("state", 102), NOT_EMITTED),
        (("acked", 100), True),
        (("committed", 101), None),
        (("emit_next", 102), True),           # after the commit, the next in line still
        (("next_commit_offset",), None),
    ], after=lambda i: _valid(p))
    assert p.uncommitted == 2


def test_a_window_with_nothing_in_flight_starts_at_the_first_record_emitted():
    # A committed offset the log no longer holds (retention) must not cost a byte per gap.
    p = PartitionOffsets(committed=5)
    p.emitted(10_000_000)
    assert p.base == 10_000_000 and len(p.states) == 1
    p.acked(10_000_000)
    assert p.next_commit_offset() == 10_000_001


def test_emitting_below_the_committed_offset_is_refused():
    p = PartitionOffsets(committed=50)
    p.emitted(50)
    with pytest.raises(ValueError, match="below the committed offset 50"):
        p.emitted(49)


def test_the_nth_uncommitted_offset_counts_only_emitted_offsets():
    p = PartitionOffsets(committed=10)
    for off in (10, 11, 14, 15, 16, 20):
        p.emitted(off)
    p.acked(11)
    assert [p.nth_uncommitted(n) for n in range(1, 8)] == [10, 11, 14, 15, 16, 20, None]


def test_one_byte_per_offset_in_flight():
    p = PartitionOffsets(committed=0)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for off in range(100_000):
        p.emitted(off)
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert used / 100_000 < 2.5, used


def _valid(p: PartitionOffsets) -> None:
    assert p.uncommitted == len(p.states) - p.states.count(NOT_EMITTED)


# -- the retry schedule -----------------------------------------------------------------------

def test_retries_back_off_exponentially_up_to_the_maximum_delay():
    r = RetrySchedule(initial_delay=0.5, delay_period=0.1, max_retries=None, max_delay=1.0)
    assert [r.delay(n) for n in (1, 2, 3, 4, 5)] == [0.5, 0.2, 0.4, 0.8, 1.0]
    play(calls(r), [
        (("schedule", "a", 10.0), True),
        (("is_ready", "a", 10.4), False),
        (("ready", 10.4), []),
        (("is_ready", "a", 10.5), True),
        (("schedule", "b", 10.1), True),      # due 10.6
        (("ready", 10.6), ["a", "b"]),
        (("retrying", "a"), None),            # emitted again: no longer due ...
        (("ready", 10.6), ["b"]),
        (("schedule", "a", 11.0), True),      # ... but its failures still count: 2nd, 0.2 s
        (("is_ready", "a", 11.19), False),
        (("is_ready", "a", 11.2), True),
        (("forget", "a"), None),              # acked
        (("schedule", "a", 12.0), True),      # a new first failure: the initial delay again
        (("is_ready", "a", 12.4), False),
    ])


def test_a_message_that_failed_more_than_max_retries_is_not_scheduled():
    r = RetrySchedule(0, 0.002, max_retries=2, max_delay=10)
    assert r.schedule("m", 0) and r.schedule("m", 1)
    assert r.schedule("m", 2) is False   # the third failure is past two retries
    assert not r.is_scheduled("m") and "m" not in r.fails


def test_max_retries_zero_retries_nothing():
    assert RetrySchedule(0, 0.002, max_retries=0).schedule("m", 0) is False


# -- partitions --------------------------------------------------------------------------------

def test_partitions_are_dealt_round_robin_over_the_tasks_in_sorted_order():
    tps = [("b", 1), ("a", 0), ("b", 0), ("a", 1), ("a", 2)]
    got = [assign_round_robin(tps, i, 2) for i in range(2)]
    assert got == [[("a", 0), ("a", 2), ("b", 1)], [("a", 1), ("b", 0)]]
    assert sorted(sum(got, [])) == sorted(tps)
    assert assign_round_robin(tps, 4, 5) == [("b", 1)]
    with pytest.raises(ValueError):
        assign_round_robin(tps, 2, 2)


# -- config and translators ----------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    (dict(topics=None), "exactly one of topics"),
    (dict(topics=["a"], topic_pattern="a.*"), "exactly one of topics"),
    (dict(topics=[]), "must be topic names"),
    (dict(topic_pattern="(", topics=None), "not a regular expression"),
    (dict(processing_guarantee="EXACTLY_ONCE"), "is not one of AT_LEAST_ONCE"),
    (dict(props={"enable.auto.commit": True}), "breaks AT_LEAST_ONCE"),
    (dict(props={"enable.auto.commit": "true"},
          processing_guarantee=ProcessingGuarantee.AT_MOST_ONCE), "drop enable.auto.commit"),
    (dict(props={"group.id": "x"}), "KafkaSpoutConfig\\(group_id=...\\)"),
    (dict(poll_timeout_ms=5000), "holds the worker's loop"),
    (dict(max_uncommitted_offsets=0), "max_uncommitted_offsets must be"),
    (dict(record_translator=lambda r: [r]), "must be a RecordTranslator"),
])
def test_a_bad_spout_config_is_refused_with_the_reason(kwargs, message):
    args = {"topics": ["t"], **kwargs}
    with pytest.raises(KafkaConfigError, match=message):
        KafkaSpoutConfig("127.0.0.1:9092", **args)


def test_retry_backoff_refuses_negative_settings():
    with pytest.raises(KafkaConfigError, match="max_retries must be"):
        RetryBackoff(max_retries=-1)
    with pytest.raises(KafkaConfigError, match="delay_period_ms must not be negative"):
        RetryBackoff(delay_period_ms=-1)


def test_guarantees_and_strategies_are_taken_by_name_and_topics_sorted():
    c = KafkaSpoutConfig("h:1", topics=["b", "a", "b"], processing_guarantee="AT_MOST_ONCE",
                         first_poll_offset_strategy="LATEST")
    assert c.topics == ("a", "b")
    assert c.processing_guarantee is ProcessingGuarantee.AT_MOST_ONCE
    props = c.consumer_props("g", "h:1")
    assert props["enable.auto.commit"] is False
    assert props["fetch.queue.backoff.ms"] == 10  # librdkafka's 1 s starves a fast spout
    assert KafkaSpoutConfig("h:1", topics=["a"], props={"fetch.queue.backoff.ms": 50}) \
        .consumer_props("g", "h:1")["fetch.queue.backoff.ms"] == 50
    assert c.servers({}) == "h:1"
    assert KafkaSpoutConfig(topics=["a"]).servers({"kafka.bootstrap.servers": "k:9"}) == "k:9"
    with pytest.raises(KafkaConfigError, match="no bootstrap_servers"):
        KafkaSpoutConfig(topics=["a"]).servers({})


def test_translators_route_and_declare_streams():
    rec = KafkaRecord("clicks", 3, 7, b"k", b"v")
    assert DefaultRecordTranslator().translate(rec) == ["clicks", 3, 7, b"k", b"v"]
    t = ByTopicRecordTranslator(default=DefaultRecordTranslator())
    t.for_topic("clicks", lambda r: [r.key, r.value], ["user", "page"], stream="clicks")
    out = t.translate(rec)
    assert isinstance(out, KafkaTuple) and out.stream == "clicks" and out == [b"k", b"v"]
    assert t.translate(KafkaRecord("other", 0, 1, None, b"x")) == ["other", 0, 1, None, b"x"]
    assert t.streams() == {"clicks": ("user", "page"),
                           "default": DefaultRecordTranslator.FIELDS}
    with pytest.raises(KafkaConfigError, match="gets fields"):
        t.for_topic("views", lambda r: [r.value], ["x"], stream="clicks")
    s = SimpleRecordTranslator(lambda r: [r.value.decode()], ["line"], stream="lines")
    assert s.translate(rec).stream == "lines"
