"""A topology's Python requirements: what ``squall jar`` ships and a supervisor installs.

``squall jar --requirements FILE`` (or a ``requirements.txt`` at the package's root) puts the
file in the package and names it in ``topology.python.requirements``; ``--wheelhouse DIR``
adds DIR's wheels under :data:`SHIPPED_WHEELHOUSE`, named in ``topology.python.wheelhouse``.
Each supervisor installs them into a virtualenv of the topology's own
(``supervisor/venvs.py``).

The file comes from the network as far as a supervisor is concerned, and pip reads more than
requirements from one (``-r /etc/squall/pki/supervisor.key`` would put a key in the error
that ``squall list`` shows; ``--index-url`` or a direct URL would make the supervisor fetch
from anywhere). So only requirement specifiers are accepted: a name, extras, versions, an
environment marker and ``--hash`` options; no other option, URL or path. Both the client
(early, with the line number) and the supervisor (the trust boundary) check with
:func:`parse_requirements`.
"""

from __future__ import annotations

import posixpath
import re

from .errors import SquallError

#: Where ``--requirements FILE`` and ``--wheelhouse DIR`` go inside the package (a name
#: that is not an importable module, so it never shadows the topology's own code).
SHIPPED_REQUIREMENTS = ".squall/requirements.txt"
SHIPPED_WHEELHOUSE = ".squall/wheelhouse"
#: A file of this name at the package's root is the topology's requirements unless the
#: conf names another (or sets topology.python.requirements to null).
DEFAULT_REQUIREMENTS = "requirements.txt"
#: Most bytes and lines of a requirements file (a list of names, not a place for data).
REQUIREMENTS_MAX_BYTES = 64 * 1024
REQUIREMENTS_MAX_LINES = 1000
#: The longest path inside a package a conf key may name.
MAX_PACKAGE_PATH_CHARS = 256

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_VERSION_ONE = r"(?:~=|===|==|!=|<=|>=|<|>)\s*[A-Za-z0-9_.*+!-]+"
_VERSIONS = rf"{_VERSION_ONE}(?:\s*,\s*{_VERSION_ONE})*"
_REQUIREMENT = re.compile(
    rf"(?P<name>{_NAME})\s*"
    rf"(?:\[\s*(?P<extras>{_NAME}(?:\s*,\s*{_NAME})*)?\s*\])?\s*"
    rf"(?P<versions>\(\s*{_VERSIONS}\s*\)|{_VERSIONS})?\s*"
    # Markers compare environment names with quoted strings: no URL, path or option fits.
    r"(?:;\s*(?P<marker>[A-Za-z0-9_.'\" <>=!~()+-]+))?")
_HASH = re.compile(r"--hash=(?:sha256|sha384|sha512):[0-9a-fA-F]+")
#: pip takes a "name" ending so for an archive file to install (a path, not a requirement).
_ARCHIVE_ENDINGS = (".whl", ".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz",
                    ".tar.xz", ".txz", ".tar.lz", ".tlz")
#: The cluster's own package is always the cluster's (a pin would replace the runtime).
_RESERVED = frozenset({"squall"})


class RequirementsError(SquallError):
    """A requirements file Squall will not hand to pip (the message names the line)."""


def canonical_name(name: str) -> str:
    """PEP 503's normalized project name (``Foo_bar`` -> ``foo-bar``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_requirements_file(data: bytes, where: str) -> tuple[str, ...]:
    """:func:`parse_requirements` of a file's bytes, read up to one byte past
    REQUIREMENTS_MAX_BYTES (the client and each supervisor check alike)."""
    if len(data) > REQUIREMENTS_MAX_BYTES:
        raise RequirementsError(f"{where}: larger than {REQUIREMENTS_MAX_BYTES} bytes")
    try:
        return parse_requirements(data.decode("utf-8"), where)
    except UnicodeDecodeError:
        raise RequirementsError(f"{where}: not UTF-8 text") from None


def parse_requirements(text: str, where: str = "requirements") -> tuple[str, ...]:
    """The requirement lines of ``text`` (comments, blank lines and line continuations
    resolved), each checked to be a plain requirement specifier; raises
    :class:`RequirementsError` naming the first line that is not (an option, a URL, a
    path, ``squall`` itself) or a file past :data:`REQUIREMENTS_MAX_BYTES` or
    :data:`REQUIREMENTS_MAX_LINES`."""
    if len(text.encode("utf-8", "replace")) > REQUIREMENTS_MAX_BYTES:
        raise RequirementsError(f"{where}: larger than {REQUIREMENTS_MAX_BYTES} bytes")
    raw_lines = text.splitlines()
    if len(raw_lines) > REQUIREMENTS_MAX_LINES:
        raise RequirementsError(f"{where}: more than {REQUIREMENTS_MAX_LINES} lines")
    out: list[str] = []
    pending, start = "", 0
    for number, raw in enumerate(raw_lines, 1):
        if not pending:
            start = number
        line = pending + raw
        if line.endswith("\\"):  # pip's line continuation
            pending = line[:-1] + " "
            continue
        pending = ""
        # pip's comments: '#' at the start or after whitespace.
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if line:
            out.append(_check_line(line, f"{where} line {start}"))
    if pending.strip():
        out.append(_check_line(pending.strip(), f"{where} line {start}"))
    return tuple(out)


def _check_line(line: str, where: str) -> str:
    if line.startswith("-"):
        raise RequirementsError(
            f"{where}: {line[:80]!r}: only requirement specifiers are accepted (name, "
            "extras, versions, a marker, --hash), not pip options such as -r, -e or "
            "--index-url")
    spec, _, rest = line.partition(" --")
    hashes = ("--" + rest).split() if rest else []
    for h in hashes:
        if not _HASH.fullmatch(h):
            raise RequirementsError(f"{where}: {h[:80]!r}: the only option a requirement "
                                    "may carry is --hash=sha256:<hex>")
    m = _REQUIREMENT.fullmatch(spec.strip())
    if m is None or spec.strip().lower().endswith(_ARCHIVE_ENDINGS):
        raise RequirementsError(
            f"{where}: {line[:80]!r} is not a requirement specifier such as "
            "'name[extra]>=1.0; python_version >= \"3.11\"' (URLs, paths and VCS links "
            "are not accepted: put the wheel in --wheelhouse instead)")
    if canonical_name(m.group("name")) in _RESERVED:
        raise RequirementsError(f"{where}: {m.group('name')!r}: the workers always run "
                                "the cluster's own squall; leave it out")
    return " ".join([spec.strip(), *hashes])


def package_path_problem(path: str) -> str | None:
    """Why ``path`` cannot name a file or directory inside a package (None if it can): a
    relative path with '/' separators that stays inside."""
    if not path or len(path) > MAX_PACKAGE_PATH_CHARS:
        return f"must be a path of 1-{MAX_PACKAGE_PATH_CHARS} characters inside the package"
    norm = posixpath.normpath(path)
    if path.startswith("/") or "\\" in path or norm == ".." or norm.startswith("../") \
            or any(ord(c) < 32 for c in path):
        return f"{path!r} must be a relative path inside the package ('/' separators)"
    return None


def entry_name(path: str) -> str:
    """``path`` as the package archive names it (no ``./``, no trailing ``/``)."""
    return posixpath.normpath(path).strip("/")
