"""Flux YAML: Storm's own example files build the topology they declare; what Squall cannot
honour is refused with the file and line."""

from __future__ import annotations

import os
import textwrap

import pytest

from squall.client import grouping as g
from squall.client.errors import SquallError
from squall.client.testing import LogInfoBolt, TestWordCounter, TestWordSpout
from squall.deploy.flux import load_flux

FLUX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flux")
CONFIGS = os.path.join(FLUX, "configs")


def inputs(loaded, cid):
    return [(i.component, i.stream, i.grouping.kind, i.grouping.fields)
            for i in loaded.topology.components[cid].inputs]


def test_storms_multilang_example_builds_its_shell_topology():
    loaded = load_flux(os.path.join(FLUX, "multilang.yaml"))
    assert loaded.name == "shell-topology"
    assert loaded.conf == {"topology.workers": 1}
    assert loaded.code_dir == FLUX
    comps = loaded.topology.components
    assert comps["sentence-spout"].shell.argv == ["node", "randomsentence.js"]
    assert comps["sentence-spout"].streams["default"].fields == ["word"]
    assert comps["splitsentence"].shell.argv == ["python3", "splitsentence.py"]
    assert comps["splitsentence"].kind == "bolt" and comps["splitsentence"].serialized is None
    assert inputs(loaded, "splitsentence") == [("sentence-spout", "default", g.SHUFFLE, [])]
    assert inputs(loaded, "count") == [("splitsentence", "default", g.FIELDS, ["word"])]
    assert comps["count"].streams["default"].fields == ["word", "count"]
    assert inputs(loaded, "log") == [("count", "default", g.SHUFFLE, [])]


def test_config_methods_on_shell_components_set_component_conf():
    loaded = load_flux(os.path.join(CONFIGS, "shell_test.yaml"))
    for cid in ("sentence-spout", "splitsentence"):
        conf = loaded.topology.components[cid].conf
        assert conf["rabbitmq.configfile"] == "etc/rabbit.yml"
        assert conf["publisher.data_paths"] == ["actions"]


def test_an_include_as_a_resource_brings_the_included_topology():
    loaded = load_flux(os.path.join(CONFIGS, "include_test.yaml"))
    assert loaded.name == "include-topology"  # override: false keeps ours
    assert set(loaded.topology.components) == {"sentence-spout", "splitsentence", "log", "count"}
    assert loaded.conf == {"topology.workers": 1}


def test_properties_and_environment_substitution(monkeypatch):
    monkeypatch.setenv("PATH", "/opt/bin:/usr/bin")
    path = os.path.join(CONFIGS, "substitution-test.yaml")
    loaded = load_flux(path, os.path.join(CONFIGS, "test.properties"), env_filter=True)
    assert loaded.name == "substitution-topology"
    assert loaded.conf["test.env.value"] == "/opt/bin:/usr/bin"
    assert loaded.conf["list.property.target"] == ["A string list"]
    assert loaded.conf["list.element.property.target"] == "A string list"
    # Without --env-filter the environment is not read.
    plain = load_flux(path, os.path.join(CONFIGS, "test.properties"))
    assert plain.conf["test.env.value"] == "${ENV-PATH}"


def test_storms_testing_components_stand_in_for_the_java_ones():
    loaded = load_flux(os.path.join(FLUX, "simple_wordcount.yaml"))
    comps = loaded.topology.components
    assert [type(comps[c].instantiate()) for c in ("spout-1", "bolt-1", "bolt-2")] == \
        [TestWordSpout, TestWordCounter, LogInfoBolt]
    assert inputs(loaded, "bolt-1") == [("spout-1", "default", g.FIELDS, ["word"])]


def write(tmp_path, text, name="t.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return str(p)


BASE = """\
    name: t
    spouts:
      - id: s
        className: org.apache.storm.testing.TestWordSpout
    bolts:
      - id: b
        className: {bolt}
        {extra}
    streams:
      - from: s
        to: b
        grouping:
          type: {grouping}
"""


@pytest.mark.parametrize("bolt, extra, grouping, match", [
    ("org.apache.storm.kafka.bolt.KafkaBolt", "", "SHUFFLE",
     r"t\.yaml:7: unknown class 'org\.apache\.storm\.kafka\.bolt\.KafkaBolt'"),
    ("org.apache.storm.testing.TestWordCounter", "paralelism: 2", "SHUFFLE",
     r"t\.yaml:8: bolt 'b': unknown key 'paralelism'"),
    ("org.apache.storm.testing.TestWordCounter", "", "SHUFFEL",
     r"t\.yaml:13: unknown grouping type 'SHUFFEL'"),
    ("org.apache.storm.testing.TestWordCounter", "", "FIELDS",
     r"t\.yaml:13: a FIELDS grouping needs args"),
    ("no_such_module_xyz.Bolt", "", "SHUFFLE",
     r"t\.yaml:7: unknown class 'no_such_module_xyz\.Bolt': cannot import"),
])
def test_mistakes_name_the_file_and_line(tmp_path, bolt, extra, grouping, match):
    path = write(tmp_path, BASE.format(bolt=bolt, extra=extra, grouping=grouping))
    with pytest.raises(SquallError, match=match):
        load_flux(path)


def test_a_stream_to_an_unknown_component_and_bad_yaml(tmp_path):
    path = write(tmp_path, BASE.format(bolt="org.apache.storm.testing.TestWordCounter",
                                       extra="", grouping="SHUFFLE").replace("to: b", "to: c"))
    with pytest.raises(SquallError, match=r"t\.yaml:11: stream to 'c': no spout or bolt"):
        load_flux(path)
    with pytest.raises(SquallError, match=r"bad\.yaml:2: not valid YAML"):
        load_flux(write(tmp_path, "name: t\n  spouts: [\n", "bad.yaml"))
    with pytest.raises(SquallError, match=r"top\.yaml:2: unknown section 'bolt'"):
        load_flux(write(tmp_path, "name: t\nbolt: []\n", "top.yaml"))


def test_an_included_files_mistake_names_that_file_and_line(tmp_path):
    write(tmp_path, BASE.format(bolt="org.apache.storm.testing.TestWordCounter",
                                extra="bogus: 1", grouping="SHUFFLE"), "inc.yaml")
    main = write(tmp_path, "name: main\nspouts:\nbolts:\nincludes:\n  - file: inc.yaml\n",
                 "main.yaml")
    with pytest.raises(SquallError, match=r"inc\.yaml:8: bolt 'b': unknown key 'bogus'"):
        load_flux(main)


def test_a_misspelt_key_with_a_block_value_is_reported_on_its_own_line(tmp_path):
    path = write(tmp_path, BASE.format(bolt="org.apache.storm.testing.TestWordCounter",
                                       extra="bogus:\n          a: 1", grouping="SHUFFLE"))
    with pytest.raises(SquallError, match=r"t\.yaml:8: bolt 'b': unknown key 'bogus'"):
        load_flux(path)


def test_python_classes_components_refs_and_properties(tmp_path):
    (tmp_path / "mycomps.py").write_text(textwrap.dedent("""\
        from squall.client import BasicBolt

        class Prefix:
            def __init__(self, text):
                self.text = text

        class PrefixBolt(BasicBolt):
            def __init__(self, prefix, upper=False):
                self.prefix, self.upper = prefix, upper
                self.suffix = ""
            def set_suffix(self, suffix):
                self.suffix = suffix
            def execute(self, tup, collector):
                collector.emit([self.prefix.text + tup.values[0] + self.suffix])
            def declare_output_fields(self, declarer):
                declarer.declare(["word"])
        """))
    path = write(tmp_path, """\
        name: py
        components:
          - id: pre
            className: mycomps.Prefix
            constructorArgs: [">> "]
        spouts:
          - id: s
            className: org.apache.storm.testing.TestWordSpout
            parallelism: 2
        bolts:
          - id: b
            className: mycomps.PrefixBolt
            constructorArgs: [{ref: pre}]
            properties:
              - name: upper
                value: true
            configMethods:
              - name: setSuffix
                args: ["!"]
            numTasks: 4
        streams:
          - from: s
            to: b
            grouping: {type: LOCAL_OR_SHUFFLE}
        """)
    loaded = load_flux(path)
    comp = loaded.topology.components["b"]
    bolt = comp.instantiate()
    assert (bolt.prefix.text, bolt.upper, bolt.suffix) == (">> ", True, "!")
    assert comp.num_tasks == 4 and loaded.topology.components["s"].parallelism == 2
    assert inputs(loaded, "b") == [("s", "default", g.LOCAL_OR_SHUFFLE, [])]
