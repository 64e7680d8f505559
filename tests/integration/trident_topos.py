"""Trident topologies for the integration tests (importable by worker processes)."""

from squall.client.errors import FailedException
from squall.client.trident.operation import Count, Function
from squall.client.trident.stream import TridentTopology


class Split(Function):
    def execute(self, tup, collector):
        for word in tup[0].split():
            collector.emit([word])


def word_count(spout, state_factory, parallelism=2):
    t = TridentTopology()
    (t.new_stream("lines", spout)
      .each(["line"], Split(), ["word"])
      .group_by(["word"])
      .persistent_aggregate(state_factory, Count(), ["count"])
      .parallelism_hint(parallelism))
    return t.build()


def word_count_drpc(spout, state_factory):
    """Storm's TridentWordCount: the word count, and a DRPC function ``words`` that sums the
    counts of the words of its argument (a query of the counts' state)."""
    from squall.client.trident.operation import FilterNull, Sum
    from squall.client.trident.persist import MapGet
    t = TridentTopology()
    counts = (t.new_stream("lines", spout)
              .each(["line"], Split(), ["word"])
              .group_by(["word"])
              .persistent_aggregate(state_factory, Count(), ["count"]))
    (t.new_drpc_stream("words")
      .each(["args"], Split(), ["word"])
      .group_by(["word"])
      .state_query(counts, ["word"], MapGet(), ["count"])
      .each(["count"], FilterNull())
      .aggregate(Sum(), ["sum"], ["count"]))
    return t.build()


# --- fault injection and observation for tests/integration/test_trident_exactly_once.py ----------
# Everything below records into Redis lists named ``<trident.redis.key.prefix><name>`` (the
# topology conf's Redis), so a test on real worker processes reads back what user code saw.

import json  # noqa: E402

from squall.client.trident.spout import Emitter, TridentSpout  # noqa: E402
from squall.client.trident.state.base import State, StateFactory  # noqa: E402


def redis_list(conf, name):
    """(a redis-py client, the key of list ``name``) for the Redis of the topology conf."""
    from squall.client import config as cfg
    from squall.client.trident.state.redis_map import connect, redis_settings
    settings = redis_settings(conf)
    return connect(settings), settings[cfg.TRIDENT_REDIS_KEY_PREFIX] + name


class FlakySplit(Split):
    """Split that raises FailedException for the first attempt of each txid in ``fail_txids``
    this task sees, recording ``"<txid>:<attempt id>"`` in list ``log``. The attempt comes from
    the collector (``collector.batch``, a TransactionAttempt): operations get no context
    argument per batch.

    ``hold_txid``: the first task on a worker that does not run component ``hold_away_from``
    (the master coordinator) to see a tuple of that txid records ``"<pid>:<txid>"`` in list
    ``holding`` and then blocks its worker (for at most :data:`HOLD_SECS`), so a test can kill
    -9 a worker that holds a batch half-processed. Once per txid for the whole topology (a
    Redis set), so the replayed batch in the restarted worker passes."""

    HOLD_SECS = 120

    def __init__(self, fail_txids, log="faults", hold_txid=None, hold_away_from=None):
        self.fail_txids = set(fail_txids)
        self.log = log
        self.hold_txid = hold_txid
        self.hold_away_from = hold_away_from

    def prepare(self, conf, context):
        self.client, self.key = redis_list(conf, self.log)
        _, self.holding_key = redis_list(conf, "holding")
        _, self.held_key = redis_list(conf, "held")
        #: txid -> the attempt id that was failed (later attempts pass).
        self.failed = {}
        away = set(context.component_tasks(self.hold_away_from or "")) if self.hold_away_from \
            else set()
        self.may_hold = self.hold_txid is not None and not (away & set(context.worker_tasks))

    def execute(self, tup, collector):
        batch = collector.batch
        if batch.txid in self.fail_txids and \
                self.failed.setdefault(batch.txid, batch.attempt_id) == batch.attempt_id:
            self.client.rpush(self.key, f"{batch.txid}:{batch.attempt_id}")
            raise FailedException(f"injected failure of batch {batch}")
        if self.may_hold and batch.txid == self.hold_txid and \
                self.client.sadd(self.held_key, batch.txid):
            import os
            import time
            self.client.rpush(self.holding_key, f"{os.getpid()}:{batch.txid}")
            deadline = time.monotonic() + self.HOLD_SECS
            while time.monotonic() < deadline:  # the test kills this process meanwhile
                time.sleep(0.05)
        super().execute(tup, collector)

    def cleanup(self):
        self.client.close()


class RecordingState(State):
    """A map state that records each commit in a Redis list as ``"<partition>:<txid>:ok"``;
    the first commit of a txid in ``fail_commits`` raises FailedException after the inner
    state committed (its writes are in Redis) and records ``"...:failed"``."""

    def __init__(self, inner, client, key, partition, fail_commits):
        self.inner, self.client, self.key = inner, client, key
        self.partition = partition
        self.fail_commits = set(fail_commits)
        self.failed = set()

    def begin_commit(self, txid):
        self.inner.begin_commit(txid)

    def commit(self, txid):
        self.inner.commit(txid)
        if txid in self.fail_commits and txid not in self.failed:
            self.failed.add(txid)
            self.client.rpush(self.key, f"{self.partition}:{txid}:failed")
            raise FailedException(f"injected failure of the commit of txid {txid}")
        self.client.rpush(self.key, f"{self.partition}:{txid}:ok")

    def __getattr__(self, name):  # multi_get / multi_update / multi_put / get / update / set
        return getattr(self.inner, name)

    def close(self):
        self.inner.close()
        self.client.close()


class RecordingStateFactory(StateFactory):
    """Wraps a state factory (e.g. RedisMapState); its states record commits in list ``log``."""

    def __init__(self, inner, log="commits", fail_commits=()):
        self.inner, self.log, self.fail_commits = inner, log, set(fail_commits)

    def make_state(self, conf, partition_index, num_partitions):
        client, key = redis_list(conf, self.log)
        return RecordingState(self.inner.make_state(conf, partition_index, num_partitions),
                              client, key, partition_index, self.fail_commits)


class _FixedWordsEmitter(Emitter):
    def __init__(self, words):
        self.words = words

    def emit_batch(self, attempt, metadata, collector):
        for w in self.words:
            collector.emit([w])


class FixedWords(TridentSpout):
    """Every batch is the same words (field ``word``): a stream of queries."""

    def __init__(self, words):
        self.words = list(words)

    def get_emitter(self, tx_state_id, conf, context):
        return _FixedWordsEmitter(self.words)

    def output_fields(self):
        return ["word"]


class RecordReads(Function):
    """Appends ``[txid, word, count]`` (JSON) to list ``log`` for each tuple; emits nothing."""

    def __init__(self, log="reads"):
        self.log = log

    def prepare(self, conf, context):
        self.client, self.key = redis_list(conf, self.log)

    def execute(self, tup, collector):
        self.client.rpush(self.key, json.dumps([collector.batch.txid, tup[0], tup[1]]))

    def cleanup(self):
        self.client.close()


def word_count_recorded(spout, state_factory, fail_split=(), fail_commits=(), parallelism=2,
                        query_words=(), record_commits=True, hold_txid=None):
    """The word count with FlakySplit and (``record_commits``) a RecordingStateFactory around
    ``state_factory``; with ``query_words``, a second stream (FixedWords) reads their counts
    each batch (state_query) and records them (RecordReads, list ``reads``); ``hold_txid``:
    see FlakySplit (held away from the master coordinator of the first batch group)."""
    from squall.client.trident.persist import MapGet
    if record_commits:
        state_factory = RecordingStateFactory(state_factory, fail_commits=fail_commits)
    t = TridentTopology()
    lines = t.new_stream("lines", spout)
    if hold_txid is not None:
        # Lines shuffled over two Split executors: the scheduler spreads a component's
        # executors over the workers (its P1), so one of them runs, and gets lines, where the
        # master coordinator does not.
        lines = lines.shuffle()
    words = lines.each(["line"], FlakySplit(fail_split, hold_txid=hold_txid,
                                            hold_away_from="$mastercoord-bg0"), ["word"])
    if hold_txid is not None:
        words = words.parallelism_hint(2)
    counts = (words
               .group_by(["word"])
               .persistent_aggregate(state_factory, Count(), ["count"])
               .parallelism_hint(parallelism))
    if query_words:
        (t.new_stream("queries", FixedWords(query_words))
          .state_query(counts, ["word"], MapGet(), ["count"])
          .each(["word", "count"], RecordReads(), ["unused"]))
    return t.build()


class RecordTotals(Function):
    """Appends each batch's global count to a Redis list (``test.redis.list``)."""

    def prepare(self, conf, context):
        import redis
        self.client = redis.Redis(host=conf["trident.redis.host"], port=int(conf["trident.redis.port"]))
        self.key = conf["test.redis.list"]

    def execute(self, tup, collector):
        self.client.rpush(self.key, tup[0])
        collector.emit([True])


def stateless_count(spout):
    """Lines per batch counted by a global aggregate, no state: no component is a committer."""
    from squall.client.trident.operation import Count
    t = TridentTopology()
    (t.new_stream("lines", spout)
      .aggregate(Count(), ["n"])
      .each(["n"], RecordTotals(), ["recorded"]))
    return t.build()


def partition_count(spout):
    """Lines per batch counted per partition (partition_aggregate on 2 tasks after a
    local_or_shuffle): each task records its own share of every batch."""
    from squall.client.trident.operation import Count
    t = TridentTopology()
    (t.new_stream("lines", spout)
      .local_or_shuffle()
      .partition_aggregate(Count(), ["n"]).parallelism_hint(2)
      .each(["n"], RecordPartials(), ["recorded"]))
    return t.build()


class RecordPartials(RecordTotals):
    """Appends ``<task index>:<count>`` to the Redis list: which task counted what."""

    def prepare(self, conf, context):
        super().prepare(conf, context)
        self.index = context.this_task_index

    def execute(self, tup, collector):
        self.client.rpush(self.key, f"{self.index}:{tup[0]}")
        collector.emit([True])
