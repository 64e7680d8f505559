"""What the lag endpoint's sources share (``/api/v1/topology/:id/lag``): the spouts that say
in their component configuration what they read, and one entry a spout in Storm's
``TopologySpoutLag`` shape, its figures or an ``errorInfo``, all of a request's reads
bounded by one deadline. The sources: Kafka (kafka_lag.py) and Redis streams
(redis_lag.py)."""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Mapping

#: Seconds all the reads of one lag request may take together.
LAG_DEADLINE_SECS = 5.0


class LagError(Exception):
    """A spout's figures cannot be read: its entry carries this as ``errorInfo``."""


def new_deadline() -> float:
    """The monotonic time a lag request's reads must end by."""
    return time.monotonic() + LAG_DEADLINE_SECS


def spout_confs(topology: Any, reads: Callable[[Mapping[str, Any]], bool]) -> dict[str, dict]:
    """spout id -> its component configuration, for the spouts whose configuration
    ``reads`` accepts (``topology`` is a StormTopology message)."""
    out = {}
    for sid, spec in topology.spouts.items():
        conf = json.loads(spec.common.json_conf) if spec.common.json_conf else {}
        if reads(conf):
            out[sid] = conf
    return out


def lag_entries(spouts: Mapping[str, dict], spout_type: str,
                lag: Callable[[str, Mapping[str, Any]], dict]) -> dict[str, dict]:
    """One entry a spout, in spout id order: ``lag(sid, conf)`` as its ``spoutLagResult``,
    or the :class:`LagError` it raised as ``errorInfo``."""
    out = {}
    for sid, conf in sorted(spouts.items()):
        entry: dict[str, Any] = {"spoutId": sid, "spoutType": spout_type}
        try:
            entry["spoutLagResult"] = lag(sid, conf)
        except LagError as e:
            entry["errorInfo"] = str(e)
        out[sid] = entry
    return out
