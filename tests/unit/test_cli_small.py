"""The CLI without a cluster: a misspelt -c key (a warning, or a refusal with --strict), `squall version`."""

import subprocess
import sys

from squall.deploy.net import free_port


def squall(*args):
    return subprocess.run([sys.executable, "-m", "squall.cli", *args], capture_output=True,
                          text=True, timeout=60, env={"SQUALL_CONF": "", "PATH": "/usr/bin"})


def test_a_misspelt_key_is_a_warning_with_the_closest_known_key():
    port = free_port()  # nothing listens: the command fails after the warning, in one line
    r = squall("list", "-c", f"nimbus.grpc.port={port}", "-c", "nimbus.sedes=[127.0.0.1]")
    assert ("Warning: -c: nimbus.sedes is not a key Squall or Storm knows: did you mean "
            "nimbus.seeds?") in r.stderr, r.stderr
    assert "cannot reach Nimbus" in r.stderr


def test_strict_refuses_it_before_doing_anything():
    r = squall("--strict", "list", "-c", "topology.wrokers=3")
    assert r.returncode == 1
    assert r.stderr.strip() == ("Error: -c: topology.wrokers is not a key Squall or Storm "
                                "knows: did you mean topology.workers? (refused: --strict)")


def test_known_and_own_keys_pass_silently():
    r = squall("--strict", "list", "-c", f"nimbus.grpc.port={free_port()}",
               "-c", "wordcount.sentences=5")  # outside Storm's namespaces: the user's own
    assert "Warning" not in r.stderr and "--strict" not in r.stderr, r.stderr


def test_version_prints_the_installed_version():
    from importlib.metadata import version
    r = squall("version")
    assert r.returncode == 0 and r.stdout.startswith(f"Squall {version('squall')} (Python ")


def test_a_conf_path_that_is_a_directory_is_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "squall.cli", "list"], capture_output=True,
                       text=True, timeout=60, env={"SQUALL_CONF": str(tmp_path),
                                                   "PATH": "/usr/bin"})
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip() == (f"Error: config '{tmp_path}': is a directory, not a config "
                                "file (SQUALL_CONF names a squall.yaml)")


def test_durations_must_be_positive_finite_seconds():
    for bad in ("-5", "0", "nan", "inf"):
        r = squall("local", "no_such_topology.py", "--duration", bad)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "is not a number of seconds greater than 0" in r.stderr, r.stderr
    r = squall("monitor", "wc", "-i", "nan")
    assert r.returncode == 2 and "is not a number of seconds greater than 0" in r.stderr


def test_strict_after_the_command_and_for_a_files_conf(tmp_path):
    """--strict was "No such option" after the command's name, and did not look at a
    topology file's CONF: both now, before anything starts."""
    r = squall("list", "--strict", "-c", "topology.wrokers=3")
    assert r.returncode == 1 and r.stderr.strip() == (
        "Error: -c: topology.wrokers is not a key Squall or Storm knows: did you mean "
        "topology.workers? (refused: --strict)"), r.stderr
    topo = tmp_path / "typo.py"
    topo.write_text("from squall.client import TopologyBuilder\n"
                    "from squall.client.testing import TestWordSpout\n"
                    "CONF = {'topology.max.spout.pendng': 10}\n"
                    "def topology():\n    b = TopologyBuilder()\n"
                    "    b.set_spout('words', TestWordSpout())\n    return b\n")
    for args in (("local", str(topo), "--strict"), ("--strict", "local", str(topo))):
        r = squall(*args)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.strip() == (
            f"Error: {topo}: CONF: topology.max.spout.pendng is not a key Squall or Storm "
            "knows: did you mean topology.max.spout.pending? (refused: --strict)"), r.stderr
        assert "starting ZooKeeper" not in r.stdout
    r = squall("jar", str(topo), "--strict")  # refused before reaching for any Nimbus
    assert r.returncode == 1 and r.stderr.strip() == (
        "Error: topology typo's conf: topology.max.spout.pendng is not a key Squall or Storm "
        "knows: did you mean topology.max.spout.pending? (refused: --strict)"), r.stderr


PURE_LOG = """2026-11-26 20:39:39,020 ERROR [t pid=1] squall.worker: component=tags error: x
worker 127.0.0.1:1 of topology t: component 'tags' raised squall.client.errors.SerializationError: field 'tags' holds a builtins.set
Traceback (most recent call last):
  File "{root}/worker/loop.py", line 181, in _loop
    done += ex.run_once()
  File "/tmp/squall-local-x/supervisor/stormdist/t-1/package.zip/setval.py", line 7, in execute
    collector.emit([tup.values[0], {{1, 2}}])
  File "{root}/worker/collector.py", line 152, in _check_values
    raise SerializationError(
squall.client.errors.SerializationError: field 'tags' holds a builtins.set
"""


def test_a_crash_is_summed_up_as_what_and_where_in_the_users_code():
    import os

    import squall
    from squall.deploy.local import user_crash
    root = os.path.dirname(squall.__file__)
    line, text = user_crash(PURE_LOG.format(root=root))
    assert line == ("tags raised SerializationError at setval.py:7 in execute "
                    "(collector.emit([tup.values[0], {1, 2}])): field 'tags' holds a "
                    "builtins.set")
    assert text == "SerializationError: field 'tags' holds a builtins.set"
    assert user_crash("worker started\nnothing raised here\n") is None


def test_a_web_daemon_under_a_service_manager_names_the_token_file_not_the_token(monkeypatch,
                                                                              tmp_path):
    """Under systemd the output goes to the journal, which others read (the adm group): the
    login line names the token's file; at a terminal it is the URL to open."""
    from squall.cli import daemons

    class Web:
        label = "UI"
        url = "https://10.0.0.1:8080"
        conf = {"squall.http.token.file": "/etc/squall/http.token"}

        def start(self):
            pass

        def close(self):
            pass

        def login_url(self):
            return self.url + "/?token=s3cret-token-value"

    said = []
    monkeypatch.setenv("JOURNAL_STREAM", "8:1234")
    daemons.run_web(Web(), said.append, wait=lambda: 15)
    assert "s3cret-token-value" not in " ".join(said)
    assert "https://10.0.0.1:8080/?token=<the token in /etc/squall/http.token>" in said[0]
    monkeypatch.delenv("JOURNAL_STREAM")
    monkeypatch.setattr(daemons.sys.stdout, "isatty", lambda: True, raising=False)
    said.clear()
    daemons.run_web(Web(), said.append, wait=lambda: 15)
    assert "?token=s3cret-token-value" in said[0]
