"""set_log_level and monitor as a user types them, and a worker applying and reverting levels."""

import logging

import pytest

from squall.cli import commands
from squall.client.log_levels import Applier, level_number, read_config, write_config
from squall.proto import nimbus_pb2 as pb


def test_parse_log_levels():
    got = commands.parse_log_levels(["squall.worker=debug:60", "ROOT=WARN"])
    assert got == {"squall.worker": ("DEBUG", 60), "ROOT": ("WARN", 0)}
    for bad, msg in (("squall.worker", "LOGGER=LEVEL"), ("=INFO", "LOGGER=LEVEL"),
                     ("x=LOUD", "unknown log level 'LOUD'"), ("x=INFO:soon", "not whole"),
                     ("x=INFO:0", "positive")):
        with pytest.raises(ValueError, match=msg):
            commands.parse_log_levels([bad])
    assert level_number("fatal") == logging.CRITICAL and level_number("TRACE") == 5


def test_applier_sets_reverts_on_timeout_and_on_removal(tmp_path):
    name = "squall.test.applier"
    lg = logging.getLogger(name)
    lg.setLevel(logging.INFO)
    a = Applier()
    assert write_config(str(tmp_path), {name: {"level": "DEBUG", "reset_at": 100}})
    assert not write_config(str(tmp_path), {name: {"level": "DEBUG", "reset_at": 100}})
    cfg = read_config(str(tmp_path))
    assert a.apply(cfg, now=50) == [f"{name}=DEBUG"] and lg.level == logging.DEBUG
    assert a.apply(cfg, now=60) == []  # nothing changes: nothing logged
    assert a.apply(cfg, now=100) == [f"{name} restored"] and lg.level == logging.INFO
    a.apply({name: {"level": "ERROR", "reset_at": 0}}, now=0)
    assert lg.level == logging.ERROR
    assert a.apply({}, now=0) == [f"{name} restored"] and lg.level == logging.INFO
    root = logging.getLogger()
    before = root.level
    try:
        a.apply({"ROOT": {"level": "WARN"}}, now=0)
        assert root.level == logging.WARNING
    finally:
        a.apply({}, now=0)
    assert root.level == before
    assert read_config(str(tmp_path / "missing")) is None


def _info(name, comps):
    info = pb.TopologyInfo(name=name)
    for comp, par, streams in comps:
        c = info.components.add(component_id=comp, num_executors=par)
        for s, n in streams.items():
            c.streams[s].emitted = n
    return info


def test_monitor_rows_are_per_component_and_stream_rates():
    before = _info("wc", [("split", 2, {"default": 100}), ("__acker", 1, {"__ack_ack": 5})])
    after = _info("wc", [("split", 2, {"default": 300, "other": 10}),
                         ("__acker", 1, {"__ack_ack": 9})])
    assert commands.monitor_rows(before, after, 2.0, None, None) == [
        ("wc", "split", 2, "default", 200, 100.0), ("wc", "split", 2, "other", 10, 5.0)]
    assert commands.monitor_rows(before, after, 2.0, "split", "other") == [
        ("wc", "split", 2, "other", 10, 5.0)]
    # System components only when asked for by name.
    assert commands.monitor_rows(before, after, 1.0, "__acker", None) == [
        ("wc", "__acker", 1, "__ack_ack", 4, 4.0)]
