"""The README as a newcomer reads it: its first topology runs as written, every Python
block parses and imports what it names, and every file a command names exists and is run by
a test of the suite (issue 24: every README example checked by a test that runs it)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(REPO, "README.md"), encoding="utf-8") as _fh:
    README = _fh.read()


def python_blocks() -> list[tuple[int, str]]:
    """(line, source) of every ```python block, dedented (some sit in list items)."""
    out = []
    for m in re.finditer(r"^( *)```python\n(.*?)^ *```", README, re.M | re.S):
        out.append((README[:m.start()].count("\n") + 1, textwrap.dedent(m.group(2))))
    return out


def test_the_readmes_pytest_example_passes_against_its_first_topology(tmp_path):
    """"Testing your topology": the test as written, beside the first example saved as
    word_count.py, run by pytest in a process of its own."""
    blocks = python_blocks()
    test = next(src for _, src in blocks if "from squall.testing import" in src)
    (tmp_path / "word_count.py").write_text(blocks[0][1])
    (tmp_path / "test_word_count.py").write_text(test)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "test_word_count.py"], capture_output=True, text=True, timeout=120,
                          cwd=str(tmp_path))
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout + proc.stderr


def test_the_first_topology_of_the_readme_runs_as_written(tmp_path):
    line, source = python_blocks()[0]
    assert "def topology():" in source, f"README.md:{line} is not the word count any more"
    (tmp_path / "readme_word_count.py").write_text(source)
    proc = subprocess.run([sys.executable, "-m", "squall.cli", "local", "readme_word_count.py",
                           "--duration", "6"], capture_output=True, text=True, timeout=120,
                          cwd=str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    spout = re.search(r"spout sentences: emitted=(\d+) acked=(\d+) failed=0 pending=0", out)
    assert spout and int(spout.group(1)) == int(spout.group(2)) > 0, out
    count = re.search(r"bolt count: executed=(\d+) emitted=0 acked=(\d+) failed=0", out)
    # Six words a sentence, every word counted and acked.
    assert count and int(count.group(1)) == int(count.group(2)) == 6 * int(spout.group(1)), out
    assert "error" not in out, out


@pytest.mark.parametrize("line, source", python_blocks(), ids=lambda v: str(v)[:20])
def test_every_python_block_parses_and_its_imports_resolve(line, source):
    """The blocks are fragments (``builder`` comes from the first one); their imports must
    name what Squall has, as written."""
    tree = ast.parse(source, filename=f"README.md:{line}")
    imports = [n for n in tree.body if isinstance(n, ast.Import) and
               all(a.name.split(".")[0] == "squall" for a in n.names) or
               isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "squall"]
    exec(compile(ast.Module(imports, type_ignores=[]), f"README.md:{line}", "exec"), {})


def test_every_file_a_command_names_exists_and_a_test_runs_it():
    named = set(re.findall(r"squall (?:local|jar)(?: --flux)? (examples/[\w./-]+)", README))
    assert "examples/word_count.py" in named, named
    tests = ""
    for d, _, files in os.walk(os.path.join(REPO, "tests")):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(d, f), encoding="utf-8") as fh:
                    tests += fh.read()
    for path in sorted(named):
        assert os.path.exists(os.path.join(REPO, path)), f"README names {path}: no such file"
        if path == "examples/":
            continue
        assert f'"{os.path.basename(path)}"' in tests, f"no test runs {path} (README names it)"
