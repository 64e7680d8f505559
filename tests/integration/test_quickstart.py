"""``squall quickstart NAME``: the folder it writes runs as written, under pytest (its own
test, on squall.testing) and under ``squall local`` (the real daemons)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def squall(*args, cwd):
    return subprocess.run([sys.executable, "-m", "squall.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=str(cwd))


def test_the_project_it_writes_passes_its_tests_and_runs_locally(tmp_path):
    r = squall("quickstart", "demo", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    project = tmp_path / "demo"
    assert sorted(p.name for p in project.iterdir()) == [
        "README.md", "resources", "squall.yaml", "test_topology.py", "topology.py"]
    assert 'NAME = "demo"' in (project / "topology.py").read_text()

    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                           capture_output=True, text=True, timeout=120, cwd=str(project))
    assert tests.returncode == 0 and "2 passed" in tests.stdout, tests.stdout + tests.stderr

    run = squall("local", "topology.py", "--duration", "6", cwd=project)
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "topology demo submitted" in out, out
    # resources/sentences.txt: 5 lines, 32 words, each line acked once.
    assert "spout sentences: emitted=5 acked=5 failed=0 pending=0" in out, out
    assert re.search(r"bolt count: executed=32 emitted=32 acked=32 failed=0", out), out


def test_it_refuses_a_bad_name_and_a_folder_that_exists(tmp_path):
    r = squall("quickstart", "a/b", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith("Error: project name 'a/b': "), r.stderr
    (tmp_path / "taken").mkdir()
    r = squall("quickstart", "taken", cwd=tmp_path)
    assert r.returncode == 1 and "exists already" in r.stderr, r.stderr
    assert list((tmp_path / "taken").iterdir()) == []
