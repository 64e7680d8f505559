"""Optional parts of Squall and the packages they need: ``pyproject.toml``'s extras.

``pip install squall`` runs plain topologies; ``squall[spark]`` adds the Spark bridge
(pyspark, pyarrow), ``squall[trident-redis]`` Trident's Redis map states (redis-py) and
``squall[kafka]`` the Kafka connector (confluent-kafka), ``squall[redis]`` the Redis bolts and
stream spout (redis-py, hiredis), ``squall[jdbc]`` the PostgreSQL bolts and states (psycopg),
``squall[nats]`` the NATS JetStream spout and bolt (nats-py) and ``squall[files]`` the
exactly-once file sink (fsspec, pyarrow).
A module of an optional part calls :func:`require` when it is imported, so a user without
the extra gets one line naming it (:class:`MissingExtra`, an ImportError) instead of
``No module named 'pyarrow'``. A component that needs an extra says so in its
``requires_extras`` attribute; the topology carries the names to Nimbus, which refuses the
submit when its host lacks one (the cluster's hosts share one install).
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Iterable

from .errors import SquallError

#: Extra -> the importable packages it installs (see pyproject.toml).
EXTRAS: dict[str, tuple[str, ...]] = {
    "spark": ("pyspark", "pyarrow"),
    "trident-redis": ("redis",),
    "redis": ("redis", "hiredis"),
    "kafka": ("confluent_kafka",),
    "jdbc": ("psycopg",),
    "nats": ("nats",),
    "files": ("fsspec", "pyarrow"),
}


class MissingExtra(SquallError, ImportError):
    """An optional part of Squall is used without its extra installed."""

    def __init__(self, message: str, extra: str, modules: list[str]):
        self.extra = extra
        self.modules = modules
        super().__init__(message)


def _installed(module: str) -> bool:
    if module in sys.modules:
        return sys.modules[module] is not None  # None: import blocked (as Python's own rule)
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing(extra: str) -> list[str]:
    """The packages of ``extra`` that are not installed here (ValueError: no such extra)."""
    if extra not in EXTRAS:
        raise ValueError(f"no extra {extra!r}; known: {', '.join(sorted(EXTRAS))}")
    return [m for m in EXTRAS[extra] if not _installed(m)]


def require(extra: str, what: str, where: str = "") -> None:
    """Raise :class:`MissingExtra` naming ``extra`` when any of its packages is missing."""
    gone = missing(extra)
    if gone:
        host = f" on {where}" if where else ""
        raise MissingExtra(f"{what} needs squall[{extra}] ({', '.join(gone)} not installed"
                           f"{host}): pip install 'squall[{extra}]'", extra, gone)


def check_extras(extras: Iterable[str], what: str, where: str = "") -> None:
    """:func:`require` each of ``extras`` for ``what``; an unknown name is a MissingExtra too
    (a newer client's extra this Squall does not have)."""
    for extra in sorted(set(extras)):
        if extra not in EXTRAS:
            raise MissingExtra(f"{what} needs squall[{extra}], which this Squall does not "
                               f"have{' on ' + where if where else ''}: upgrade Squall",
                               extra, [])
        require(extra, what, where)
