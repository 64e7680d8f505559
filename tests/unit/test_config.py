"""Configuration: defaults, layering, CLI overrides, type checks, aliases and squall.yaml."""

import pytest

from squall.client import config as cfg
from squall.client.errors import ConfigError, SquallError


def test_defaults():
    d = cfg.defaults()
    assert d[cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS] == 30
    assert d[cfg.TOPOLOGY_ACKER_EXECUTORS] is None
    assert d[cfg.TOPOLOGY_WORKERS] == 1
    assert d[cfg.TOPOLOGY_MAX_SPOUT_PENDING] is None
    assert d[cfg.TOPOLOGY_DEBUG] is False
    assert d[cfg.TOPOLOGY_BACKPRESSURE_ENABLE] is True
    assert d[cfg.TOPOLOGY_FALL_BACK_ON_PICKLE] is False  # pickle is opt-in (issue 11)
    assert set(d) == set(cfg.known_keys())
    cfg.validate(d)  # the defaults themselves are valid


def test_defaults_are_fresh_copies():
    d = cfg.defaults()
    d[cfg.SUPERVISOR_SLOTS_PORTS].append(9999)
    assert 9999 not in cfg.defaults()[cfg.SUPERVISOR_SLOTS_PORTS]


def test_layering_order(tmp_path):
    path = tmp_path / "squall.yaml"
    path.write_text("topology.workers: 2\n"
                    "topology.message.timeout.secs: 40\n"
                    "topology.max.spout.pending: 100\n"
                    "topology.debug: true\n")
    yaml_conf = cfg.load_yaml(path)
    topo = {cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 50, cfg.TOPOLOGY_MAX_SPOUT_PENDING: 200,
            "user.key": "topo"}
    component = {cfg.TOPOLOGY_MAX_SPOUT_PENDING: 300, "user.key": "component"}
    cli = cfg.parse_cli_overrides(["user.key=cli"])

    conf = cfg.layered(yaml_conf, topo)
    assert conf[cfg.TOPOLOGY_STATS_FREQ_SECS] == 1.0       # default
    assert conf[cfg.TOPOLOGY_WORKERS] == 2                 # yaml over default
    assert conf[cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS] == 50   # topology over yaml
    assert conf[cfg.TOPOLOGY_DEBUG] is True

    comp = cfg.component_conf(conf, component, cli)
    assert comp[cfg.TOPOLOGY_MAX_SPOUT_PENDING] == 300     # component over topology
    assert comp["user.key"] == "cli"                       # cli over component
    assert comp[cfg.TOPOLOGY_WORKERS] == 2
    assert cfg.component_conf(conf, component)["user.key"] == "component"
    assert conf[cfg.TOPOLOGY_MAX_SPOUT_PENDING] == 200     # the topology conf is not mutated


def test_layered_later_layer_wins_and_none_layers_skipped():
    conf = cfg.layered(None, {cfg.TOPOLOGY_WORKERS: 2}, {}, {cfg.TOPOLOGY_WORKERS: 4})
    assert conf[cfg.TOPOLOGY_WORKERS] == 4


def test_unknown_keys_pass_through():
    conf = cfg.layered({"my.own.setting": {"any": ["thing"]}})
    assert conf["my.own.setting"] == {"any": ["thing"]}


def test_parse_cli_overrides_yaml_types():
    assert cfg.parse_cli_overrides(["topology.workers=3", "a.b=[1,2]", "x=true"]) == \
        {"topology.workers": 3, "a.b": [1, 2], "x": True}


def test_parse_cli_overrides_value_details():
    out = cfg.parse_cli_overrides(["s=hello", "f=0.5", "eq=a=b", "empty=", " k =1"])
    assert out == {"s": "hello", "f": 0.5, "eq": "a=b", "empty": None, "k": 1}


@pytest.mark.parametrize("pair", ["novalue", "=3", " =3"])
def test_parse_cli_overrides_bad_pair(pair):
    with pytest.raises(ConfigError, match="key=value"):
        cfg.parse_cli_overrides([pair])


def test_parse_cli_overrides_invalid_yaml_names_key():
    with pytest.raises(ConfigError) as info:
        cfg.parse_cli_overrides(["a.b=[1,2"])
    assert info.value.key == "a.b" and "YAML" in str(info.value)


@pytest.mark.parametrize("key, value", [
    (cfg.TOPOLOGY_WORKERS, "3"),
    (cfg.TOPOLOGY_WORKERS, 2.0),
    (cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS, "30"),
    (cfg.TOPOLOGY_DEBUG, 1),
    (cfg.STORM_ZOOKEEPER_SERVERS, "zk1"),
    (cfg.TOPOLOGY_ENVIRONMENT, ["A=1"]),
])
def test_wrong_type_refused_naming_key(key, value):
    with pytest.raises(ConfigError) as info:
        cfg.layered({key: value})
    assert info.value.key == key
    assert key in str(info.value) and type(value).__name__ in str(info.value)


@pytest.mark.parametrize("key", [cfg.TOPOLOGY_WORKERS, cfg.TOPOLOGY_MAX_SPOUT_PENDING,
                                 cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS])
def test_bool_not_accepted_for_numeric_key(key):
    with pytest.raises(ConfigError) as info:
        cfg.check_value(key, True)
    assert info.value.key == key


def test_float_accepted_for_numeric_seconds():
    assert cfg.layered({cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 2.5})[
        cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS] == 2.5


def test_null_only_for_nullable_keys():
    cfg.check_value(cfg.TOPOLOGY_MAX_SPOUT_PENDING, None)
    with pytest.raises(ConfigError, match="must be set"):
        cfg.check_value(cfg.TOPOLOGY_WORKERS, None)


@pytest.mark.parametrize("conf, key", [
    ({cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 0}, cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS),
    ({cfg.TOPOLOGY_WORKERS: 0}, cfg.TOPOLOGY_WORKERS),
    ({cfg.TOPOLOGY_ACKER_EXECUTORS: -1}, cfg.TOPOLOGY_ACKER_EXECUTORS),
    ({cfg.TOPOLOGY_MAX_SPOUT_PENDING: 0}, cfg.TOPOLOGY_MAX_SPOUT_PENDING),
    ({cfg.BACKPRESSURE_LOW_WATERMARK: 0.95}, cfg.BACKPRESSURE_HIGH_WATERMARK),
])
def test_unusable_values_refused(conf, key):
    with pytest.raises(ConfigError) as info:
        cfg.layered(conf)
    assert info.value.key == key


def test_aliases_map_to_current_names():
    conf = cfg.layered({"topology.ackers": 0})
    assert conf[cfg.TOPOLOGY_ACKER_EXECUTORS] == 0
    assert "topology.ackers" not in conf
    assert cfg.parse_cli_overrides(["topology.ackers=2"]) == {cfg.TOPOLOGY_ACKER_EXECUTORS: 2}
    assert cfg.component_conf(conf, {"topology.ackers": 3})[cfg.TOPOLOGY_ACKER_EXECUTORS] == 3


def test_alias_value_is_type_checked():
    with pytest.raises(ConfigError) as info:
        cfg.layered({"topology.ackers": "two"})
    assert info.value.key == cfg.TOPOLOGY_ACKER_EXECUTORS


def test_load_yaml_none_means_no_file():
    assert cfg.load_yaml(None) == {}


def test_load_yaml_missing_explicit_path(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        cfg.load_yaml(missing)
    assert str(missing) in str(info.value) and "not found" in str(info.value)


def test_load_yaml_empty_file_is_empty_conf(tmp_path):
    path = tmp_path / "squall.yaml"
    path.write_text("# nothing set\n")
    assert cfg.load_yaml(path) == {}


def test_load_yaml_normalizes_aliases(tmp_path):
    path = tmp_path / "squall.yaml"
    path.write_text("topology.ackers: 2\n")
    assert cfg.load_yaml(path) == {cfg.TOPOLOGY_ACKER_EXECUTORS: 2}


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_load_yaml_non_mapping_refused(tmp_path, text):
    path = tmp_path / "squall.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        cfg.load_yaml(path)
    assert str(path) in str(info.value) and "mapping" in str(info.value)


@pytest.mark.parametrize("text", ["[]\n", "false\n", "0\n"])
def test_load_yaml_falsy_non_mapping_refused(tmp_path, text):
    path = tmp_path / "squall.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="mapping"):
        cfg.load_yaml(path)


def test_load_yaml_invalid_yaml(tmp_path):
    path = tmp_path / "squall.yaml"
    path.write_text("topology.workers: [1,\n")
    with pytest.raises(ConfigError) as info:
        cfg.load_yaml(path)
    assert str(path) in str(info.value) and "YAML" in str(info.value)


def test_find_yaml_prefers_env(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SQUALL_CONF", raising=False)
    assert cfg.find_yaml() is None
    (tmp_path / "squall.yaml").write_text("{}\n")
    assert cfg.find_yaml() == "squall.yaml"
    monkeypatch.setenv("SQUALL_CONF", "/etc/squall/custom.yaml")
    assert cfg.find_yaml() == "/etc/squall/custom.yaml"


def test_conf_warnings_name_storm_keys_squall_lacks_and_likely_typos():
    conf = {"topology.worker.childopts": "-Xmx1g", "topology.max.spout.pendng": 5,
            "topology.workers": 2, "topology.ackers": 1, "wordcount.sentences": 10,
            "spark.master": "local[2]", "trident.redis.hots": "h", "topology.my.own": 1}
    assert cfg.conf_warnings(conf, "topology wc") == [
        "topology wc: topology.max.spout.pendng is not a key Squall or Storm knows: did you "
        "mean topology.max.spout.pending?",
        "topology wc: topology.my.own is not a key Squall or Storm knows; it has no effect",
        "topology wc: topology.worker.childopts is a Storm key Squall does not implement; it "
        "has no effect",
        "topology wc: trident.redis.hots is not a key Squall or Storm knows: did you mean "
        "trident.redis.host?"]
    assert cfg.conf_warnings(cfg.defaults()) == []  # every Squall key is known


def test_spark_keys_close_to_sparks_own_are_likely_typos(monkeypatch):
    conf = {"spark.mastr": "spark://h:7077", "spark.master": "local[2]",
            "spark.sql.shuffle.partition": 4, "spark.sql.shuffle.partitions": 4,
            "spark.hadoop.fs.s3a.endpoint": "x",  # a family: Hadoop's keys pass
            "spark.executor.resource.gpu.amount": 1, "spark.executorEnv.PATH": "/bin",
            "spark.cassandra.connection.host": "h"}  # a connector's own: close to none
    assert cfg.conf_warnings(conf, "-c") == [
        "-c: spark.mastr is not a key Spark knows: did you mean spark.master? (it would reach "
        "Spark as it is, and Spark ignores keys it does not know)",
        "-c: spark.sql.shuffle.partition is not a key Spark knows: did you mean "
        "spark.sql.shuffle.partitions? (it would reach Spark as it is, and Spark ignores keys "
        "it does not know)"]
    monkeypatch.setenv(cfg.STRICT_ENV, "1")
    with pytest.raises(SquallError, match=r"spark.mastr .* did you mean spark.master\?.*"
                                          r"\(refused: --strict\)"):
        cfg.refuse_unknown_keys({"spark.mastr": "x"}, "CONF")
    cfg.refuse_unknown_keys({"spark.master": "x", "spark.cassandra.connection.host": "h"}, "CONF")


def test_spark_keys_are_sparks():
    keys, families = cfg.spark_keys()
    assert len(keys) > 1000 and {"spark.master", "spark.driver.memory", "spark.ui.enabled",
                                 "spark.sql.shuffle.partitions", "spark.executor.memory",
                                 "spark.cores.max"} <= keys
    assert "spark.hadoop." in families and all(f.endswith(".") for f in families)


def test_storm_keys_are_storms():
    keys = cfg.storm_keys()
    assert len(keys) > 450 and "topology.message.timeout.secs" in keys
    assert "topology.executor.threaded" not in keys  # Squall's own


@pytest.mark.parametrize("key", [cfg.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL3_SLEEP_MILLIS,
                                 cfg.TOPOLOGY_SPOUT_WAIT_MAX_MILLIS])
def test_a_negative_spout_wait_is_refused_naming_the_key(key):
    """A wait is a duration: a negative one is a mistake said at submit (the loops would
    clamp it to 0 and poll the spout again at once, which 0 asks for)."""
    with pytest.raises(ConfigError, match=f"{key}.*>= 0, got -1"):
        cfg.validate({key: -1})
    cfg.validate({key: 0})
