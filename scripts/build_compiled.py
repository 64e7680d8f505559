"""Compile Squall's per-tuple path with Cython, in place, from the same .py files.

A module may have a ``.pxd`` beside it (Cython's augmenting declarations: cdef classes,
C-typed attributes and locals); the compiled build takes its types from there while the
``.py`` stays the one source of the logic and the pure-Python fallback.

Run by scripts/setup.sh (``.venv/bin/python scripts/build_compiled.py``). The modules are
squall._compiled.COMPILED; each gets a C extension beside its source, which the importer
prefers (``SQUALL_PURE_PYTHON=1`` switches back to the source, see _compiled.py). A build
that fails leaves the pure-Python modules in place and says so in one line: Squall still
runs, slower. An up-to-date build is kept (``--force`` rebuilds); ``--clean`` removes the
extensions and the generated C files.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _modules() -> list[str]:
    """squall._compiled.COMPILED, read without importing the squall package (which would
    import the old build)."""
    import runpy
    return list(runpy.run_path(os.path.join(ROOT, "_compiled.py"))["COMPILED"])


def _path(module: str) -> str:
    return os.path.join(*module.split(".")[1:])


def clean(modules: list[str]) -> None:
    import importlib.machinery
    for m in modules:
        for suffix in [".c", *importlib.machinery.EXTENSION_SUFFIXES]:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(ROOT, _path(m) + suffix))


def build(modules: list[str]) -> None:
    """Each module as the extension ``squall.<path>`` (its classes' ``__module__`` must be
    the importable name, or pickling them fails), built in place through a ``squall``
    symlink to the repo root, whatever the checkout's directory is called."""
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension

    jobs = os.cpu_count() or 1
    out = io.StringIO()
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="squall-build-") as tmp:
        os.symlink(ROOT, os.path.join(tmp, "squall"))
        os.chdir(tmp)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                exts = cythonize([Extension(m, [os.path.join("squall", _path(m) + ".py")])
                                  for m in modules],
                                 compiler_directives={"language_level": 3}, nthreads=jobs,
                                 quiet=True)
                dist = Distribution({"ext_modules": exts, "script_name": "build_compiled"})
                cmd = dist.get_command_obj("build_ext")
                cmd.inplace = True
                cmd.parallel = jobs
                dist.run_command("build_ext")
        except (Exception, SystemExit) as e:
            raise RuntimeError((out.getvalue().strip().splitlines() or [repr(e)])[-1]) from e
        finally:
            os.chdir(cwd)


def up_to_date(modules: list[str]) -> bool:
    """Every module has an extension newer than its source, its .pxd and this script."""
    import importlib.machinery
    newest_input = os.path.getmtime(os.path.abspath(__file__))
    for m in modules:
        src = os.path.join(ROOT, _path(m) + ".py")
        pxd = os.path.join(ROOT, _path(m) + ".pxd")  # its types, when it has some
        inputs = [os.path.getmtime(src), newest_input]
        if os.path.exists(pxd):
            inputs.append(os.path.getmtime(pxd))
        exts = [os.path.join(ROOT, _path(m) + s) for s in importlib.machinery.EXTENSION_SUFFIXES]
        built = [os.path.getmtime(e) for e in exts if os.path.exists(e)]
        if not built or max(built) < max(inputs):
            return False
    return True


def main(argv: list[str]) -> int:
    modules = _modules()
    if "--clean" in argv:
        clean(modules)
        print(f"[build] removed the compiled modules ({len(modules)})")
        return 0
    if "--force" not in argv and up_to_date(modules):
        print(f"[build] the {len(modules)} compiled modules are up to date")
        return 0
    try:
        clean(modules)  # a half-built set must not mix with the sources
        build(modules)
    except Exception as e:  # noqa: BLE001 - any failure: run pure Python, say so once
        clean(modules)
        first = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        print(f"[build] warning: the compiled hot path did not build ({first}); Squall runs "
              "its pure-Python modules (slower)", file=sys.stderr)
        return 0
    print(f"[build] compiled {len(modules)} modules with Cython")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
