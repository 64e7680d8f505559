"""Dynamic log levels of a running topology (Storm's ``set_log_level`` / LogConfig).

``squall set_log_level wc -l squall.worker=DEBUG:60 -l ROOT=WARN`` asks Nimbus, which keeps
the topology's levels in ZooKeeper (``/logconfigs/<id>``); each supervisor copies them into
its workers' ``logconfig.json``, and every worker applies them within a stats interval,
restoring a logger's level when its timeout passes or the entry is removed.

The levels are Storm's names: TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF (and Python's
WARNING, CRITICAL); the logger ``ROOT`` is the root logger.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Mapping

from .contract import write_json_if_changed

LOG_CONFIG_FILE = "logconfig.json"
LEVELS = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "WARNING": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
          "CRITICAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}


def level_number(name: str) -> int:
    """The logging level of a Storm or Python level name; ValueError lists the known ones."""
    try:
        return LEVELS[str(name).upper()]
    except KeyError:
        raise ValueError(f"unknown log level {name!r}; use one of "
                         f"{', '.join(sorted(LEVELS))}") from None


def logger_name(name: str) -> str:
    """Storm's ``ROOT`` is Python's root logger ('')."""
    return "" if name in ("ROOT", "root", "") else name


def write_config(worker_dir: str, config: Mapping[str, Any]) -> bool:
    """Write ``logconfig.json`` when it differs from what is there; returns whether it did."""
    return write_json_if_changed(os.path.join(worker_dir, LOG_CONFIG_FILE), dict(config))


def read_config(worker_dir: str) -> dict[str, dict] | None:
    """``{logger: {"level", "reset_at"}}`` from ``logconfig.json``; None when absent or bad."""
    try:
        with open(os.path.join(worker_dir, LOG_CONFIG_FILE), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class Applier:
    """Applies a log config to this process's loggers and undoes it (a worker owns one)."""

    def __init__(self) -> None:
        #: logger -> its level before we changed it.
        self.saved: dict[str, int] = {}

    def apply(self, config: Mapping[str, Any], now: float) -> list[str]:
        """Set the configured levels whose timeout has not passed, restore the others;
        returns what changed, for the log."""
        wanted: dict[str, int] = {}
        for name, entry in config.items():
            try:
                level = level_number(entry["level"])
            except (KeyError, TypeError, ValueError):
                continue
            reset_at = entry.get("reset_at") or 0
            if reset_at and now >= float(reset_at):
                continue
            wanted[logger_name(name)] = level
        changes = []
        for name in list(self.saved):
            if name not in wanted:
                logging.getLogger(name or None).setLevel(self.saved.pop(name))
                changes.append(f"{name or 'ROOT'} restored")
        for name, level in wanted.items():
            lg = logging.getLogger(name or None)
            if name not in self.saved:
                self.saved[name] = lg.level
            if lg.level != level:
                lg.setLevel(level)
                changes.append(f"{name or 'ROOT'}={logging.getLevelName(level)}")
        return changes
