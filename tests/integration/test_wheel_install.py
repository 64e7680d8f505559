"""A wheel that installs anywhere (issue 24): ``python -m build`` makes the sdist and, from
it, the wheel; the wheel goes into a fresh venv outside the repo, whose ``squall`` runs the
word-count example from a temporary folder and says it is installed there.

One build and one venv for the module, which takes about a minute on two cores (the build
20 s, the pure build 10 s, the install 8 s, ``squall local`` 16 s). The build is the
README's, with two differences: ``--no-isolation`` (the dev venv has the build
requirements, setuptools and Cython, so nothing is downloaded for them) and ``CFLAGS=-O0
-g0``, which compiles the C ten times faster than Python's ``-O3 -g`` (2.5 minutes): the
packaging is under test here, not the speed. The venv is made without pip and filled by the
dev venv's pip (``--python``), with the dev venv's versions as constraints: the same
dependencies the rest of the suite runs on, from pip's cache (or PyPI, the first time).
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

from squall import _compiled

pytestmark = pytest.mark.integration

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VERSION = "0.1.0"


def _env(**extra: str) -> dict[str, str]:
    """This environment without what would point a process at the checkout, the dev venv
    or a conf of its own."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "SQUALL_CONF",
                        _compiled.ENV)}
    env.update(extra)
    return env


def _run(cmd: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n" \
                                 f"{proc.stderr[-4000:]}"
    return proc


def _compiler_here() -> bool:
    """Cython in the build's environment (the dev venv) and a C compiler on PATH: the wheel
    must then be compiled (a pure one would be the fallback hiding a broken build)."""
    cc = (os.environ.get("CC") or "cc").split()[0]
    return importlib.util.find_spec("Cython") is not None and shutil.which(cc) is not None


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict[str, str]:
    """``python -m build``: the sdist, then the wheel built from it (not from the checkout,
    so nothing of the working tree but what the sdist carries can reach the wheel)."""
    out = tmp_path_factory.mktemp("dist")
    proc = _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), REPO],
                timeout=240, env=_env(CFLAGS="-O0 -g0"))
    names = sorted(os.listdir(out))
    sdist = [n for n in names if n.endswith(".tar.gz")]
    wheel = [n for n in names if n.endswith(".whl")]
    assert len(sdist) == 1 and len(wheel) == 1, names
    return {"sdist": str(out / sdist[0]), "wheel": str(out / wheel[0]),
            "log": proc.stdout + proc.stderr}


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory) -> str:
    """A fresh venv (no system site-packages, no checkout on its path) with the wheel."""
    root = tmp_path_factory.mktemp("installed")
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=60)
    pins = root / "constraints.txt"
    versions: dict[str, str] = {}
    for d in importlib.metadata.distributions():  # the first of a name is the one imported
        name = (d.metadata["Name"] or "").lower()
        if name and name != "squall":
            versions.setdefault(name, d.version)
    pins.write_text("".join(f"{n}=={v}\n" for n, v in sorted(versions.items())))
    _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
          "--quiet", "-c", str(pins), dist["wheel"]], timeout=240, env=_env(), cwd=str(root))
    return str(venv)


def _py(venv: str, code: str, cwd: str) -> subprocess.CompletedProcess:
    return _run([os.path.join(venv, "bin", "python"), "-c", code], timeout=60, env=_env(),
                cwd=cwd)


def test_the_sdist_carries_what_the_build_needs_and_no_build_output(dist):
    with tarfile.open(dist["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    sources = {os.path.relpath(_compiled.source_path(m), _compiled.ROOT) for m in
               _compiled.COMPILED}
    pxds = {pxd for pxd in (src.removesuffix(".py") + ".pxd" for src in sources)
            if os.path.exists(os.path.join(REPO, pxd))}
    assert pxds, "no .pxd beside the compiled modules: the check below would prove nothing"
    missing = ({"pyproject.toml", "setup.py", "_compiled.py", "README.md"} | sources | pxds) \
        - names
    assert not missing, f"the sdist lacks {sorted(missing)}"
    leaked = sorted(n for n in names if n.endswith((".c", ".so", ".pyc")) or
                    n.startswith(("build/", "tests/", ".venv/")))
    assert not leaked, f"build output or checkout files in the sdist: {leaked}"


def test_the_wheel_is_compiled_when_a_compiler_is_there_and_pure_otherwise(dist):
    with zipfile.ZipFile(dist["wheel"]) as whl:
        names = set(whl.namelist())
    assert not [n for n in names if n.endswith((".c", ".pyc"))], sorted(names)
    assert not [n for n in names if not n.startswith(("squall/", f"squall-{VERSION}.dist-info/"))]
    sources = {"/".join(m.split(".")) + ".py" for m in _compiled.COMPILED}
    assert sources <= names, "the wheel must carry the sources: SQUALL_PURE_PYTHON runs them"
    built = {n for n in names if n.endswith(".so")}
    tag = os.path.basename(dist["wheel"]).removesuffix(".whl").split("-", 2)[2]
    if not _compiler_here():
        assert tag == "py3-none-any" and not built, (tag, sorted(built))
        assert "did not build" in dist["log"]
        return
    assert f"[squall] compiled {len(_compiled.COMPILED)} modules with Cython" in dist["log"], \
        dist["log"][-3000:]
    assert tag.startswith(f"cp{sys.version_info.major}{sys.version_info.minor}-") and \
        tag != "py3-none-any", tag
    # One extension per compiled module, named as its module (squall.worker.collector),
    # beside its source; nothing else compiled.
    assert {n.split(".", 1)[0] + ".py" for n in built} == sources, sorted(built)


#: Files of the package folders the wheel leaves out: an operator's, used from a checkout
#: (README, "Running a cluster"), or the generator of proto/*_pb2.py. Anything else a
#: package folder holds the package may read at run time, so the wheel must carry it.
NOT_SHIPPED = ("deploy/install-zookeeper.sh", "deploy/make-certs.sh",
               "deploy/squall.yaml.example", "deploy/systemd/", "deploy/prometheus/",
               "deploy/grafana/", "proto/generate.sh")
#: Not package folders: what pyproject.toml says is not shipped.
NOT_PACKAGES = ("tests/", "bench/", "examples/", "scripts/", "docs/", ".ci/", "build/",
                "dist/")


def test_the_wheel_carries_every_package_and_the_files_they_read(dist):
    """Every folder with an ``__init__.py`` is a package of the wheel, and every file git
    tracks in one (templates, static files, .proto) is in it too, unless NOT_SHIPPED says
    why not: a package added to the checkout but not to pyproject.toml fails here, not in
    a user's venv."""
    tracked = subprocess.run(["git", "-C", REPO, "ls-files"], capture_output=True, text=True,
                             timeout=30)
    if tracked.returncode != 0:
        pytest.skip(f"not a git checkout: {tracked.stderr.strip()}")
    files = [f for f in tracked.stdout.splitlines() if "/" in f and not f.startswith(
        NOT_PACKAGES) and os.path.exists(os.path.join(REPO, f))]
    packages = {os.path.dirname(f) for f in files if os.path.basename(f) == "__init__.py"}
    with zipfile.ZipFile(dist["wheel"]) as whl:
        names = set(whl.namelist())
    shipped = [f for f in files if not f.startswith(NOT_SHIPPED) and not f.endswith(".pxd")
               and any(f.startswith(p + "/") for p in packages)]
    shipped += [f for f in tracked.stdout.splitlines()  # the root package's own modules
                if "/" not in f and f.endswith(".py") and f != "setup.py"]
    missing = sorted(f for f in shipped if f"squall/{f}" not in names)
    assert not missing, f"in the checkout's packages but not in the wheel: {missing}"
    assert "squall/setup.py" not in names and "squall/_compiled.py" in names


def test_without_a_c_compiler_the_sdist_builds_a_pure_wheel_and_says_so(dist, tmp_path):
    """The fallback: every module's compile fails (``CC=false``), and pip still gets a wheel,
    tagged pure, with every source and no extension of a half-built set."""
    out = tmp_path / "pure"
    proc = _run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps",
                 "--no-build-isolation", "-w", str(out), dist["sdist"]], timeout=240,
                env=_env(CC="false"), cwd=str(tmp_path))
    assert ("[squall] warning: the compiled per-tuple path did not build (the C compiler "
            "failed; its output is above); building a pure-Python wheel") in proc.stdout + \
        proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert os.listdir(out) == [f"squall-{VERSION}-py3-none-any.whl"], os.listdir(out)
    with zipfile.ZipFile(out / f"squall-{VERSION}-py3-none-any.whl") as whl:
        pure = set(whl.namelist())
        assert "Root-Is-Purelib: true" in whl.read(f"squall-{VERSION}.dist-info/WHEEL").decode()
    with zipfile.ZipFile(dist["wheel"]) as whl:
        compiled = set(whl.namelist())
    assert pure == {n for n in compiled if not n.endswith(".so")}


def test_squall_version_names_the_installed_copy(venv, tmp_path):
    out = _run([os.path.join(venv, "bin", "squall"), "version"], timeout=60, env=_env(),
               cwd=str(tmp_path)).stdout
    m = re.fullmatch(r"Squall (\S+) \(Python [\d.]+, (.+)\)\n", out)
    assert m, out
    assert m.group(1) == VERSION
    installed = m.group(2)
    assert installed.startswith(venv + os.sep) and installed.endswith(os.path.join(
        "site-packages", "squall")), installed
    assert not installed.startswith(REPO)


def test_installed_squall_quickstart_writes_its_project(venv, tmp_path):
    """Its templates are package data (deploy/quickstart/), found in the installed copy."""
    _run([os.path.join(venv, "bin", "squall"), "quickstart", "demo"], timeout=60, env=_env(),
         cwd=str(tmp_path))
    written = {os.path.relpath(os.path.join(d, f), tmp_path / "demo")
               for d, _, fs in os.walk(tmp_path / "demo") for f in fs}
    assert {"topology.py", "test_topology.py", os.path.join("resources", "sentences.txt"),
            "squall.yaml", "README.md"} <= written, written


def test_the_installed_wheel_runs_its_compiled_modules(dist, venv, tmp_path):
    """pip writes ``collector.cpython-*.so`` before ``collector.py``, so every source there
    is newer than its extension: _compiled judges an installed copy by the RECORD's hashes
    instead, and the extensions load (without a word on stderr)."""
    proc = _py(venv, "import importlib, squall._compiled as c\n"
                     "for m in c.COMPILED: importlib.import_module(m)\n"
                     "import squall.worker.collector as m\n"
                     "print(m.__file__); print(','.join(c.loaded_compiled()))", str(tmp_path))
    path, loaded = proc.stdout.splitlines()
    assert path.startswith(venv + os.sep), path
    if dist["wheel"].endswith("-any.whl"):
        assert path.endswith("collector.py") and loaded == "", proc.stdout
        return
    assert proc.stderr == "", proc.stderr
    assert path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)), path
    assert loaded.split(",") == list(_compiled.COMPILED), loaded


def test_installed_squall_local_runs_the_word_count_from_a_folder_outside_the_repo(venv,
                                                                                  tmp_path):
    from squall.client.cluster_state import ZooKeeperUnavailable
    from squall.deploy.zookeeper import installation
    try:
        installation()
    except ZooKeeperUnavailable as e:
        pytest.skip(str(e))
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(os.path.join(REPO, "examples", "word_count.py"), work / "word_count.py")
    proc = subprocess.run([os.path.join(venv, "bin", "squall"), "local", "word_count.py",
                           "--duration", "8", "-c", "wordcount.sentences=3000"],
                          capture_output=True, text=True, timeout=120, cwd=str(work),
                          env=_env())
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "counts match the expected totals for 3000 sentences: yes" in out, out
    assert re.search(r"spout sentences: emitted=3000 acked=3000 failed=0", out), out
    assert "final: 30000 words" in out, out
    assert "every compiled module from its source" not in proc.stderr, proc.stderr


def test_an_edited_installed_source_runs_every_compiled_module_from_source(dist, venv,
                                                                          tmp_path):
    """The rule the RECORD replaces still holds in an installed copy: a source that is not
    the wheel's runs, with the rest of the compiled set, from source. (Last: it edits the
    venv, and puts the file back.)"""
    if dist["wheel"].endswith("-any.whl"):
        pytest.skip("a pure wheel: nothing compiled to fall back from")
    probe = ("import squall.worker.collector as m, squall._compiled as c\n"
             "print(m.__file__); print(','.join(c.loaded_compiled()))")
    edited = _py(venv, "import squall.worker.frame as f; print(f.__file__)",
                 str(tmp_path)).stdout.strip()
    source = os.path.join(os.path.dirname(edited), "frame.py")
    with open(source, "rb") as fh:
        original = fh.read()
    try:
        with open(source, "ab") as fh:
            fh.write(b"# edited after the install\n")
        proc = _py(venv, probe, str(tmp_path))
        path, loaded = proc.stdout.splitlines()
        assert path.endswith("collector.py") and loaded == "", proc.stdout
        assert "worker/frame.py changed since the wheel was installed" in proc.stderr, \
            proc.stderr
    finally:
        with open(source, "wb") as fh:
            fh.write(original)
    path = _py(venv, probe, str(tmp_path)).stdout.splitlines()[0]
    assert not path.endswith(".py"), path
