"""Squall's wheel: the pure-Python modules, and the per-tuple path compiled with Cython when
Cython and a C compiler are there.

Everything declarative lives in pyproject.toml; this file only adds the optional extensions
(``python -m build`` runs it). The modules are squall._compiled.COMPILED, the list
scripts/build_compiled.py builds in place for a dev checkout; each is compiled from its
``.py`` (types from the ``.pxd`` beside it, when it has one) as the extension
``squall.<path>``, beside its source in the wheel. The sources stay in the wheel: they are
the fallback ``SQUALL_PURE_PYTHON=1`` switches to.

* Cython missing, no C compiler, or any module failing to build: one line on stderr and a
  pure wheel (``py3-none-any``) of the same package; Squall runs it, slower. No half-built
  set is shipped (the compiled modules share C struct layouts, see _compiled.py).
* An editable install (``pip install -e .``, scripts/setup.sh) builds nothing here:
  scripts/build_compiled.py compiles the checkout in place.

The generated C files go to the build's temporary folder, never beside the sources, so
neither the sdist nor the wheel picks them up; the sdist carries the ``.py`` and ``.pxd``
files the build needs (each module's ``depends``). This file is in the sdist, not in the
wheel (BuildPyWithoutSetup).
"""

from __future__ import annotations

import contextlib
import runpy
import os
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.errors import CCompilerError, CompileError, LinkError

HERE = os.path.dirname(os.path.abspath(__file__))


def compiled_modules() -> list[str]:
    """squall._compiled.COMPILED, read without importing the squall package."""
    return list(runpy.run_path(os.path.join(HERE, "_compiled.py"))["COMPILED"])


def extensions() -> list[Extension]:
    """One extension per compiled module; paths relative to this folder, as setuptools
    wants them in an sdist."""
    out = []
    for m in compiled_modules():
        base = os.path.join(*m.split(".")[1:])
        pxd = base + ".pxd"
        out.append(Extension(m, [base + ".py"],
                             depends=[pxd] if os.path.exists(os.path.join(HERE, pxd)) else []))
    return out


class OptionalBuildExt(build_ext):
    """Cythonizes and compiles the extensions; on any failure, none of them (a pure build)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:  # one job per core, for Cython and the C compiler alike
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        if self.editable_mode or not self.extensions:
            if self.editable_mode:
                print("[squall] editable install: no extensions built here "
                      "(scripts/build_compiled.py compiles the checkout in place)")
            self._drop_extensions()
            return
        fresh = any(s.endswith(".py") for ext in self.extensions for s in ext.sources)
        try:
            if fresh:  # not when bdist_wheel's install runs this command a second time
                self._cythonize()
            super().run()
        except (Exception, SystemExit) as e:  # noqa: BLE001 - optional: any failure -> pure
            self._remove_outputs()
            self._drop_extensions()
            if isinstance(e, (CCompilerError, CompileError, LinkError)):
                why = "the C compiler failed; its output is above"  # str(e): its command
            else:
                lines = str(e).strip().splitlines()
                why = lines[-1] if lines else type(e).__name__
                why = why if len(why) <= 160 else why[:157] + "..."
            print(f"[squall] warning: the compiled per-tuple path did not build ({why}); "
                  f"building a pure-Python wheel (it runs the same code, slower)",
                  file=sys.stderr)
            return
        if fresh:
            print(f"[squall] compiled {len(self.extensions)} modules with Cython")

    def _cythonize(self) -> None:
        """Each module compiled as ``squall.<path>`` through a ``squall`` symlink to this
        folder (as scripts/build_compiled.py does), so the ``.pxd`` files' ``cimport
        squall....`` resolve whatever this folder is called; the C files go to build_temp."""
        from Cython.Build import cythonize

        c_dir = os.path.abspath(os.path.join(self.build_temp, "cython"))
        cwd = os.getcwd()
        with tempfile.TemporaryDirectory(prefix="squall-cythonize-") as tmp:
            os.symlink(HERE, os.path.join(tmp, "squall"))
            os.chdir(tmp)
            try:
                for ext in self.extensions:
                    ext.sources = [os.path.join("squall", s) for s in ext.sources]
                    ext.depends = [os.path.join("squall", s) for s in ext.depends]
                built = {e.name: e for e in cythonize(
                    self.extensions, build_dir=c_dir, quiet=True,
                    compiler_directives={"language_level": 3},
                    nthreads=int(self.parallel) if int(self.parallel) > 1 else 0)}
                # The same Extension objects (build_ext prepared them in finalize_options),
                # now compiling the C files, by absolute path (they were relative to tmp).
                for ext in self.extensions:
                    ext.sources = [os.path.abspath(s) for s in built[ext.name].sources]
                    ext.depends = []
            finally:
                os.chdir(cwd)

    def _remove_outputs(self) -> None:
        for ext in self.extensions:
            with contextlib.suppress(OSError):
                os.remove(self.get_ext_fullpath(ext.name))

    def _drop_extensions(self) -> None:
        """No extension at all: install_lib then lays the package out as pure, and the wheel
        is tagged pure (PureIfNothingBuilt)."""
        self.extensions = []
        self.distribution.ext_modules = []


class BuildPyWithoutSetup(build_py):
    """The package's modules without this file, which sits among them (the repo root is the
    package): distutils leaves out the setup script by comparing it with ``sys.argv[0]``,
    and under a PEP 517 backend that is the backend's own script, so squall/setup.py would
    ship (and run setup() when imported)."""

    def find_package_modules(self, package, package_dir):
        here = os.path.abspath(__file__)
        return [(pkg, mod, path) for pkg, mod, path in
                super().find_package_modules(package, package_dir)
                if os.path.abspath(path) != here]


class PureIfNothingBuilt(bdist_wheel):
    """Builds first, then tags the wheel by what was built: ``py3-none-any`` when no
    extension was (bdist_wheel decides the tag before the build otherwise)."""

    def run(self) -> None:
        if not self.skip_build:
            self.run_command("build")
        if not self.distribution.ext_modules:
            self.root_is_pure = True
        super().run()


setup(ext_modules=extensions(),
      cmdclass={"build_py": BuildPyWithoutSetup, "build_ext": OptionalBuildExt,
                "bdist_wheel": PureIfNothingBuilt})
