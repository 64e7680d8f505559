"""The compiled per-tuple path and its switch (squall/_compiled.py): SQUALL_PURE_PYTHON=1
runs the sources; a source edited after the build runs as source; and the user-visible
classes behave the same either way (fields, pickling, repr)."""

import os
import subprocess
import sys

import pytest

from squall import _compiled

PROBE = """
import pickle, sys
import squall
from squall import _compiled
from squall.client.tuple import Fields, Tuple
import squall.worker.collector, squall.worker.executor
t = Tuple(["the", 3], "split", "default", 4, {7: 9}, Fields(["word", "n"]))
print(repr(t))
back = pickle.loads(pickle.dumps(t))
print(back.values, back.source_component, back.source_stream, back.source_task, back.ids,
      back.value_by_field("word"), t.fields.names)
for change in (lambda: setattr(t, "values", ["x"]), lambda: delattr(t, "values")):
    try:  # values is read-only on both builds (the compiled one a member descriptor)
        change()
    except AttributeError:
        print("refused; values still", t.values)
print("compiled:", ",".join(_compiled.loaded_compiled()))
"""


def _run(pure: bool) -> list[str]:
    env = dict(os.environ)
    env.pop(_compiled.ENV, None)
    if pure:
        env[_compiled.ENV] = "1"
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_the_switch_runs_the_sources_and_the_classes_behave_the_same():
    pure = _run(pure=True)
    assert pure[-1] == "compiled: "
    built = [m for m in _compiled.COMPILED if _compiled.extension_path(m)]
    default = _run(pure=False)
    assert default[:-1] == pure[:-1]  # same repr, same fields after a pickle round trip
    assert pure[2:4] == ["refused; values still ['the', 3]"] * 2  # and values read-only
    if not built:
        pytest.skip("no compiled build here (scripts/build_compiled.py did not run)")
    shown = set(default[-1].removeprefix("compiled: ").split(","))
    assert {"squall.client.tuple", "squall.worker.collector", "squall.worker.executor"} <= shown


def test_a_source_newer_than_its_build_runs_every_compiled_module_as_source(monkeypatch,
                                                                           capsys):
    """One stale source switches the whole set: the typed modules share struct layouts (the
    collector was built against the compiled Tuple), so they load from source together."""
    name = "squall.worker.collector"
    if _compiled.extension_path(name) is None:
        pytest.skip("no compiled build here")
    monkeypatch.delenv(_compiled.ENV, raising=False)
    assert _compiled._SourceFirst().find_spec(name) is None  # fresh: the extension
    real = os.path.getmtime
    edited = _compiled.source_path("squall.client.tuple")
    built = real(_compiled.extension_path("squall.client.tuple"))
    monkeypatch.setattr(os.path, "getmtime",  # tuple.py edited a second after the build
                        lambda p: built + 1 if p == edited else real(p))
    finder = _compiled._SourceFirst()
    for module, path in ((name, os.path.join("worker", "collector.py")),
                         ("squall.client.tuple", os.path.join("client", "tuple.py")),
                         ("squall.worker.frame", os.path.join("worker", "frame.py"))):
        spec = finder.find_spec(module)
        assert spec is not None and spec.origin.endswith(path)
    err = capsys.readouterr().err
    assert err.count("newer than the compiled build") == 1 and "client/tuple.py" in err
    assert finder.find_spec("squall.nimbus.nimbus") is None  # not in the list: untouched


def test_a_pxd_newer_than_its_build_counts_as_an_edit(monkeypatch):
    """The types of a module (the struct layouts other modules were built against) are in
    its .pxd: editing only that must not run the old build either."""
    name = "squall.worker.executor"
    ext = _compiled.extension_path(name)
    if ext is None:
        pytest.skip("no compiled build here")
    monkeypatch.setattr(_compiled, "installed_hashes", lambda: None)  # a checkout
    assert name not in _compiled.stale_sources()
    real = os.path.getmtime
    pxd = _compiled.source_path(name)[:-3] + ".pxd"
    assert os.path.exists(pxd)
    built = real(ext)
    monkeypatch.setattr(os.path, "getmtime", lambda p: built + 1 if p == pxd else real(p))
    assert name in _compiled.stale_sources()
