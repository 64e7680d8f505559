"""The Redis bolts' mappers and connection settings (no server: see
tests/integration/test_redis_bolts.py for the bolts against a real Redis)."""

from __future__ import annotations

import pickle

import pytest

from squall.client.tuple import Fields, Tuple
from squall.connectors.redis import (FieldFilterMapper, FieldLookupMapper, FieldStoreMapper,
                                     MappingError, RedisConfig, RedisDataType,
                                     RedisDataTypeDescription, RedisFilterBolt, RedisLookupBolt,
                                     RedisStoreBolt)


def tup(fields, values):
    return Tuple(list(values), "src", "default", 1, None, Fields(fields))


@pytest.mark.parametrize("name, needs", [("string", False), ("list", False), ("set", False),
                                         ("hyper_log_log", False), ("hash", True),
                                         ("sorted_set", True), ("geo", True)])
def test_data_types_that_live_in_one_key_need_it(name, needs):
    if needs:
        with pytest.raises(ValueError, match="needs additional_key"):
            RedisDataTypeDescription(name)
        d = RedisDataTypeDescription(name.upper(), "holder")
        assert d.data_type is RedisDataType(name) and d.additional_key == "holder"
    else:
        assert RedisDataTypeDescription(name).data_type is RedisDataType(name)


def test_an_unknown_data_type_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown Redis data type 'queue'.*SORTED_SET"):
        RedisDataTypeDescription("queue")


def test_field_mappers_read_key_and_value_and_name_a_missing_field():
    t = tup(["word", "count"], ["storm", 3])
    store = FieldStoreMapper("string", "word", "count")
    assert store.key(t) == "storm" and store.value(t) == 3
    lookup = FieldLookupMapper("hash", "word", ("word", "seen"), additional_key="h")
    assert lookup.to_values(t, "7") == [["storm", "7"]]
    assert lookup.to_values(t, None) == [["storm", None]]
    assert FieldLookupMapper("string", "word", skip_missing=True).to_values(t, None) == []
    with pytest.raises(MappingError, match="no field 'user'.*word, count"):
        FieldFilterMapper("string", "user", ["user"]).key(t)


def test_a_key_must_be_text_or_a_number():
    assert FieldStoreMapper("string", "k", "v").key(tup(["k", "v"], [12, 1])) == "12"
    with pytest.raises(MappingError, match="must be a str, bytes or number, not dict"):
        FieldStoreMapper("string", "k", "v").key(tup(["k", "v"], [{"a": 1}, 1]))


def test_config_checks_its_settings_and_parses_cluster_nodes():
    c = RedisConfig(nodes=["10.0.0.1:7000", ("10.0.0.2", "7001")])
    assert c.nodes == [("10.0.0.1", 7000), ("10.0.0.2", 7001)]
    assert c.describe({}) == "Redis Cluster 10.0.0.1:7000,10.0.0.2:7001"
    with pytest.raises(ValueError, match="host:port"):
        RedisConfig(nodes=["nohost"])
    with pytest.raises(ValueError, match="out of range"):
        RedisConfig(nodes=["h:70000"])
    with pytest.raises(ValueError, match="nodes alone"):
        RedisConfig(nodes=["h:7000"], db=2)
    with pytest.raises(Exception, match="trident.redis.port"):
        RedisConfig(port="six")


def test_unset_settings_come_from_the_topology_conf_and_the_given_ones_win():
    conf = {"trident.redis.host": "10.1.1.1", "trident.redis.port": 6380}
    assert RedisConfig().describe(conf) == "Redis 10.1.1.1:6380"
    assert RedisConfig(port=7777).describe(conf) == "Redis 10.1.1.1:7777"
    assert "secret" not in repr(RedisConfig(password="secret"))


def test_bolts_pickle_and_refuse_what_storm_refuses():
    for bolt in (RedisStoreBolt(None, FieldStoreMapper("geo", "k", "v", additional_key="g")),
                 RedisLookupBolt(RedisConfig(port=6390), FieldLookupMapper("list", "k")),
                 RedisFilterBolt(None, FieldFilterMapper("set", "k", ["k"], additional_key="s"),
                                 stream="kept")):
        back = pickle.loads(pickle.dumps(bolt))
        assert back.data_type is bolt.data_type and back.requires_extras == ("redis",)
    with pytest.raises(ValueError, match="needs additional_key"):
        RedisFilterBolt(None, FieldFilterMapper("set", "k", ["k"]))
    with pytest.raises(ValueError, match="cannot filter on a LIST"):
        RedisFilterBolt(None, FieldFilterMapper("list", "k", ["k"]))


def test_entry_translator_reads_fields_as_redis_sends_them_whatever_their_layout():
    from squall.connectors.redis.streams import EntryTranslator
    t = EntryTranslator(["user", "action"])
    # (flat fields, values): the layout learnt from the first entry serves the next ones
    # while it holds; another layout, a missing or repeated field, fall back to a dict.
    table = [(["user", "u1", "action", "a1"], ["u1", "a1"]),
             (["user", "u2", "action", "a2"], ["u2", "a2"]),
             (["action", "a3", "user", "u3"], ["u3", "a3"]),
             (["user", "u4", "action", "a4"], ["u4", "a4"]),
             (["user", "u5"], ["u5", None]),
             (["x", "1", "user", "u6", "action", "a6"], ["u6", "a6"]),
             (["user", "u7", "user", "u8", "action", "a7"], ["u8", "a7"]),
             (["user", "u9", "action", "a9"], ["u9", "a9"]),
             (["user", "first", "user", "last"], ["last", None])]
    for flat, values in table:
        assert t.from_flat("1-0", flat) == values, flat
        assert t("1-0", dict(zip(flat[::2], flat[1::2]))) == values
    one = EntryTranslator(["sentence"])
    assert one.from_flat("1-0", ["sentence", "a b"]) == ["a b"]
    assert one.from_flat("2-0", ["other", "x"]) == [None]
    assert one.from_flat("3-0", ["sentence", "c"]) == ["c"]
    assert EntryTranslator().from_flat("4-0", ["k", "v"]) == ["4-0", {"k": "v"}]


def test_a_refusal_that_passes_fails_the_tuple_one_that_does_not_drops_it():
    from squall.connectors.redis.bolt import refused_as_is
    assert refused_as_is(Exception("WRONGTYPE Operation against a key holding the wrong kind"))
    assert refused_as_is(Exception("ERR value is not a valid float"))
    for passing in ("READONLY You can't write against a read only replica.",
                    "OOM command not allowed when used memory > 'maxmemory'.",
                    "CLUSTERDOWN The cluster is down", "LOADING Redis is loading",
                    "NOPERM this user has no permissions"):
        assert not refused_as_is(Exception(passing)), passing
    import redis.exceptions as e
    # As redis-py raises them: its known codes become classes, the code left out of the text.
    for cls in (e.ReadOnlyError, e.OutOfMemoryError, e.BusyLoadingError, e.NoPermissionError,
                e.ClusterDownError, e.TryAgainError):
        assert not refused_as_is(cls("the server cannot now")), cls
    assert refused_as_is(e.ResponseError("WRONGTYPE Operation against a key"))


def test_a_translator_subclass_that_changes_an_entry_is_called_for_every_entry():
    from types import SimpleNamespace

    from squall.connectors.redis import RedisStreamSpout
    from squall.connectors.redis.streams import EntryTranslator

    class Upper(EntryTranslator):
        def __call__(self, entry_id, fields):
            return [v.upper() for v in super().__call__(entry_id, fields)]

    spout = RedisStreamSpout("s", translator=Upper(["x"]))
    spout.open({}, SimpleNamespace(this_component_id="c", this_task_index=1, metrics=None),
               SimpleNamespace())
    assert spout._from_flat is None  # the spout builds the dict and calls the subclass
    plain = RedisStreamSpout("s", translator=EntryTranslator(["x"]))
    plain.open({}, SimpleNamespace(this_component_id="c", this_task_index=1, metrics=None),
               SimpleNamespace())
    assert plain._from_flat is not None
