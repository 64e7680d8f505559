"""Optional parts of Squall: a missing extra is one line naming it, at import and at submit."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from squall.client import extras
from squall.client.extras import MissingExtra, check_extras, missing, require
from squall.client.topology import TopologyBuilder
from squall.client.topology_proto import from_proto, to_proto


def test_missing_lists_what_is_not_importable(monkeypatch):
    assert missing("spark") == []  # the test set-up installs every extra
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert missing("spark") == ["pyarrow"]
    with pytest.raises(MissingExtra) as exc:
        require("spark", "the Spark bridge")
    assert str(exc.value) == ("the Spark bridge needs squall[spark] (pyarrow not installed): "
                              "pip install 'squall[spark]'")
    assert isinstance(exc.value, ImportError) and exc.value.extra == "spark"
    with pytest.raises(ValueError, match="no extra 'gpu'"):
        missing("gpu")
    with pytest.raises(MissingExtra, match=r"needs squall\[gpu\], which this Squall does not"):
        check_extras(["gpu"], "component 'x'")


#: Distributions whose import name is not their own.
IMPORTED_AS = {"nats_py": "nats"}


def test_every_extra_names_packages_that_pyproject_installs():
    import tomllib
    from pathlib import Path
    with open(Path(__file__).parents[2] / "pyproject.toml", "rb") as fh:
        declared = tomllib.load(fh)["project"]["optional-dependencies"]
    for extra, modules in extras.EXTRAS.items():
        # A distribution's name with "-" imports with "_" (confluent-kafka: confluent_kafka);
        # its own extras ("psycopg[binary]") are not part of the name.
        names = {d.split(">")[0].split("<")[0].split("=")[0].split("[")[0].replace("-", "_")
                 for d in declared[extra]}
        names = {IMPORTED_AS.get(n, n) for n in names}
        assert names == set(modules), (extra, names)


@pytest.mark.parametrize("module, extra", [("squall.client.spark", "spark"),
                                           ("squall.client.trident.state.redis_map",
                                            "trident-redis"),
                                           ("squall.connectors.kafka", "kafka"),
                                           ("squall.connectors.redis", "redis"),
                                           ("squall.connectors.jdbc", "jdbc"),
                                           ("squall.connectors.nats", "nats")])
def test_importing_an_optional_part_without_its_extra_names_the_extra(module, extra):
    blocked = extras.EXTRAS[extra][0]
    code = textwrap.dedent(f"""
        import sys
        sys.modules[{blocked!r}] = None
        try:
            import {module}
        except ImportError as e:
            print(type(e).__name__, e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60).stdout
    assert "MissingExtra" in out and f"needs squall[{extra}] ({blocked} not installed)" in out, out


def test_components_carry_their_extras_to_nimbus():
    from squall.client.spark import SparkBridgeBolt
    from squall.client.trident.line_files import TransactionalLineFiles
    from squall.client.trident.state.redis_map import RedisMapState
    from squall.client.trident.stream import TridentTopology
    from topos import NumberSpout

    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout())
    b.set_bolt("spark", SparkBridgeBolt(print)).shuffle_grouping("numbers")
    topo = from_proto(to_proto(b.create_topology()))
    assert topo.components["spark"].extras == ("spark",)
    assert topo.components["numbers"].extras == ()

    t = TridentTopology()
    (t.new_stream("lines", TransactionalLineFiles(["/nonexistent"]))
      .group_by(["line"])
      .persistent_aggregate(RedisMapState.transactional(None, "c"), _count(), ["n"]))
    hosted = {c.id: c.extras for c in from_proto(to_proto(t.build())).components.values()}
    assert [cid for cid, e in hosted.items() if e == ("trident-redis",)] == ["b1-persist"], hosted


def test_kafka_components_carry_the_kafka_extra_to_nimbus():
    from squall.client.trident.stream import TridentTopology
    from squall.connectors.kafka import (KafkaBolt, KafkaSpout, KafkaSpoutConfig,
                                         KafkaStateFactory, KafkaStateUpdater,
                                         KafkaTridentSpoutOpaque, TransactionalKafkaBolt)
    b = TopologyBuilder()
    b.set_spout("in", KafkaSpout(KafkaSpoutConfig("h:1", topics=["t"])))
    b.set_bolt("out", KafkaBolt("h:1", topic="o")).shuffle_grouping("in")
    b.set_bolt("xo", TransactionalKafkaBolt("h:1", topic="o")).shuffle_grouping("in")
    topo = from_proto(to_proto(b.create_topology()))
    assert {cid: c.extras for cid, c in topo.components.items() if cid in ("in", "out", "xo")} \
        == {"in": ("kafka",), "out": ("kafka",), "xo": ("kafka",)}
    t = TridentTopology()
    (t.new_stream("k", KafkaTridentSpoutOpaque(KafkaSpoutConfig("h:1", topics=["t"])))
      .partition_persist(KafkaStateFactory("o", "h:1"), KafkaStateUpdater(), ["value"]))
    hosted = {c.id: c.extras for c in from_proto(to_proto(t.build())).components.values()}
    assert hosted["spout-k"] == ("kafka",) and hosted["b1-persist"] == ("kafka",), hosted


def _count():
    from squall.client.trident.operation import Count
    return Count()
