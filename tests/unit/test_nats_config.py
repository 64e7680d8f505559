"""The NATS connectors' pure parts: settings, names, the translator and the mapper."""

from __future__ import annotations

import pytest

from squall.client.tuple import Fields, Tuple
from squall.connectors.nats import (JetStreamSpout, Message, MessageTranslator, NatsConfig,
                                    PublishMapper, durable_name)
from squall.connectors.nats.message import MappingError


def test_the_durable_consumer_is_named_after_the_topology_in_allowed_characters():
    assert durable_name("word-count") == "squall-word-count"
    assert durable_name("a.b c>*/x") == "squall-a_b_c___x"


def test_servers_come_from_the_config_then_the_topology_conf_then_the_default():
    assert NatsConfig("n1:4222,nats://n2:4223").server_urls({}) == \
        ["nats://n1:4222", "nats://n2:4223"]
    assert NatsConfig().server_urls({"nats.servers": ["h:1"]}) == ["nats://h:1"]
    assert NatsConfig().server_urls({}) == ["nats://127.0.0.1:4222"]
    assert NatsConfig().describe({"nats.servers": "nats://u:secret@h:1"}) == "NATS nats://h:1"


@pytest.mark.parametrize("args, match", [
    ({"servers": "http://h:1"}, "scheme"),
    ({"servers": []}, "NATS servers"),
    ({"user": "u"}, "go together"),
    ({"user": "u", "password": "p", "token": "t"}, "not both"),
    ({"connect_timeout_secs": 0}, "above 0"),
])
def test_a_bad_setting_is_refused_when_the_topology_is_built(args, match):
    with pytest.raises(ValueError, match=match):
        NatsConfig(**args)


def test_options_reconnect_for_ever_and_the_repr_hides_secrets():
    config = NatsConfig("h:1", user="u", password="secret")
    options = config.options({})
    assert options["max_reconnect_attempts"] == -1 and options["password"] == "secret"
    assert "secret" not in repr(config)


def test_the_spout_refuses_names_jetstream_refuses():
    with pytest.raises(ValueError, match="letters, digits"):
        JetStreamSpout("orders.eu")
    with pytest.raises(ValueError, match="letters, digits"):
        JetStreamSpout("ORDERS", durable="my consumer")
    with pytest.raises(ValueError, match="deliver_policy"):
        JetStreamSpout("ORDERS", deliver_policy="everything")


def test_the_translator_gives_subject_data_and_sequence_or_the_fields_asked():
    msg = Message("a.b", b"hi", 7, "S", {"k": "v"}, 2)
    assert MessageTranslator()(msg) == ["a.b", "hi", 7]
    t = MessageTranslator(["data", "headers", "delivered", "stream"], decode=None)
    assert t(msg) == [b"hi", {"k": "v"}, 2, "S"]
    assert t.output_fields() == ["data", "headers", "delivered", "stream"]
    with pytest.raises(UnicodeDecodeError):
        MessageTranslator()(Message("a", b"\xff", 1))
    with pytest.raises(ValueError, match="unknown field"):
        MessageTranslator(["payload"])


def tup(**values):
    return Tuple(list(values.values()), "src", "default", 1, None, Fields(list(values)))


def test_the_mapper_takes_fields_or_functions():
    m = PublishMapper(subject=lambda t: f"counts.{t['word']}", payload="count", msg_id="word")
    t = tup(word="cat", count=3)
    assert (m.subject(t), m.payload(t), m.headers(t)) == \
        ("counts.cat", b"3", {"Nats-Msg-Id": "cat"})
    fixed = PublishMapper(fixed_subject="all.words", payload="word")
    assert (fixed.subject(t), fixed.payload(t), fixed.headers(t)) == ("all.words", b"cat", None)


@pytest.mark.parametrize("values, match", [
    ({"s": "a b", "p": "x"}, "subject"),
    ({"s": "a.*", "p": "x"}, "subject"),
    ({"s": "a..b", "p": "x"}, "subject"),
    ({"s": None, "p": "x"}, "subject"),
    ({"s": "a", "p": None}, "payload"),
])
def test_a_tuple_that_does_not_map_raises_a_mapping_error(values, match):
    m = PublishMapper(subject="s", payload="p")
    t = tup(**values)
    with pytest.raises(MappingError, match=match):
        m.subject(t)
        m.payload(t)


def test_the_mapper_needs_exactly_one_subject():
    with pytest.raises(ValueError, match="one of the two"):
        PublishMapper()
    with pytest.raises(ValueError, match="one of the two"):
        PublishMapper(subject="s", fixed_subject="a")
    with pytest.raises(ValueError, match="not a subject"):
        PublishMapper(fixed_subject="a.>")


def test_a_topology_files_nats_streams_are_checked(tmp_path):
    from squall.client.errors import SquallError
    from squall.deploy.topology_file import load_topology_file
    body = ("from squall.client import TopologyBuilder\n"
            "from squall.client.testing import TestWordSpout\n"
            "NATS_STREAMS = {streams}\n"
            "def topology():\n"
            "    b = TopologyBuilder()\n"
            "    b.set_spout('w', TestWordSpout(), 1)\n"
            "    return b\n")
    good = tmp_path / "good.py"
    good.write_text(body.format(streams="{'S': ('s.>',)}"))
    assert load_topology_file(str(good)).nats_streams == {"S": ["s.>"]}
    bad = tmp_path / "bad.py"
    bad.write_text(body.format(streams="{'S': 's.>'}"))
    with pytest.raises(SquallError, match="NATS_STREAMS must map stream names to lists"):
        load_topology_file(str(bad))
