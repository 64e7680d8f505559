"""A topology file as ``squall local`` loads it: the user's mistakes are one line naming the
file and line; its report(conf) runs in a process of its own."""

from __future__ import annotations

import os
import textwrap

import pytest

from squall.client.errors import SquallError
from squall.deploy.report import run_report
from squall.deploy.topology_file import load_topology_file

GOOD = '''
from squall.client import Spout, TopologyBuilder

class Words(Spout):
    def next_tuple(self):
        pass
    def declare_output_fields(self, declarer):
        declarer.declare(["word"])

NAME = "named"
CONF = {"topology.workers": 2}

def topology():
    b = TopologyBuilder()
    b.set_spout("words", Words())
    return b
'''


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def one_line(exc):
    text = str(exc.value)
    assert "\n" not in text and "Traceback" not in text, text
    return text


def test_a_good_file_gives_its_topology_name_and_conf(tmp_path):
    loaded = load_topology_file(write(tmp_path, "good_topo.py", GOOD))
    assert (loaded.name, loaded.conf) == ("named", {"topology.workers": 2})
    assert set(loaded.topology.components) == {"words"}
    assert loaded.report is None and loaded.code_dir == str(tmp_path)


@pytest.mark.parametrize("name, text, expected", [
    ("syntax_topo.py", "x = (\n", r"syntax_topo.py:1: syntax error: '(' was never closed"),
    ("import_topo.py", "import os\nimport no_such_module_here\n",
     r"import_topo.py:2: ModuleNotFoundError: No module named 'no_such_module_here'"),
    ("raise_topo.py", "def topology():\n    return {}['missing']\n",
     r"raise_topo.py:2: KeyError: 'missing' (while building the topology"),
    ("none_topo.py", "X = 1\n", "must define a function topology()"),
    ("invalid_topo.py", "from squall.client import TopologyBuilder\n"
                        "def topology():\n    return TopologyBuilder()\n",
     "invalid topology: topology has no spout"),
])
def test_a_users_mistake_is_one_line_naming_file_and_line(tmp_path, name, text, expected):
    with pytest.raises(SquallError) as exc:
        load_topology_file(write(tmp_path, name, text))
    assert expected in one_line(exc)


def test_report_runs_in_a_process_of_its_own_with_the_conf(tmp_path, capfd):
    path = write(tmp_path, "report_topo.py", GOOD + '''
import os, threading
def report(conf):
    print(f"report pid={os.getpid()} threads={threading.active_count()} "
          f"value={conf['my.key']}", flush=True)
''')
    run_report(path, {"my.key": "hello"}, timeout=60)
    out = capfd.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("report pid="))
    fields = dict(kv.split("=") for kv in line.split()[1:])
    assert int(fields["pid"]) != os.getpid()
    assert fields["threads"] == "1"  # no gRPC, kazoo or supervisor thread to fork under
    assert fields["value"] == "hello"


def test_a_report_that_raises_is_one_line_and_a_failure(tmp_path, capfd):
    path = write(tmp_path, "bad_report_topo.py", GOOD + '''
def report(conf):
    raise ValueError("no output found")
''')
    with pytest.raises(SquallError) as exc:
        run_report(path, {}, timeout=60)
    assert "report() of" in one_line(exc)
    err = capfd.readouterr().err
    assert "bad_report_topo.py:" in err and "ValueError: no output found" in err, err
    assert "Traceback" not in err, err


def test_jvm_chatter_on_the_reports_stderr_goes_to_its_log(tmp_path, capfd):
    """What a JVM the report starts writes to fd 2 (Spark's banner, log4j lines) goes to the
    log; the report's own lines and its error still reach the console."""
    path = write(tmp_path, "noisy_report_topo.py", GOOD + '''
import os, sys
def report(conf):
    os.write(2, b"Using Spark's default log4j profile: x\\n26/11/23 23:46:09 WARN Utils: y\\n")
    print("my own warning", file=sys.stderr)
    raise ValueError("no output found")
''')
    log = tmp_path / "report-jvm.log"
    with pytest.raises(SquallError, match="JVM output in"):
        run_report(path, {}, timeout=60, jvm_log=str(log))
    err = capfd.readouterr().err
    assert "my own warning" in err and "ValueError: no output found" in err, err
    assert "log4j" not in err and "WARN Utils" not in err, err
    assert "WARN Utils: y" in log.read_text() and "log4j profile" in log.read_text()
