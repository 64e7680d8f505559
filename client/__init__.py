"""Squall's client library: the topology API, config and the code every daemon shares.

Write a topology with :class:`TopologyBuilder`, :class:`Spout`, :class:`Bolt`
and :class:`BasicBolt`; validate and serialize it with
``builder.create_topology()``. See the README's "Writing a topology".
"""

from .components import BasicBolt, Bolt, Component, OutputFieldsDeclarer, Spout
from .config import layered as layered_config
from .context import TopologyContext
from .errors import (ConfigError, FailedException, InvalidTopology, ReportedFailedException,
                     SerializationError, SquallError)
from .grouping import CustomStreamGrouping
from .shell import ShellBolt, ShellSpout
from .state import KeyValueState, StateProvider
from .stateful import CheckpointedSpout, StatefulBolt, StatefulWindowedBolt
from .topology import Topology, TopologyBuilder
from .tuple import DEFAULT_STREAM, Fields, Tuple
from .windowing import Count, Duration, TupleWindow, WindowedBolt


def __getattr__(name: str) -> str:
    """``__version__``, Squall's version (Nimbus reports it, `squall version` prints it),
    read on first use: reading package metadata takes ~20 ms, which every worker start and
    CLI call would otherwise pay."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version
    try:
        value = version("squall")  # pyproject.toml's, the one source
    except PackageNotFoundError:  # run from a checkout that was never installed
        value = "0+unknown"
    globals()["__version__"] = value
    return value

__all__ = [
    "BasicBolt", "Bolt", "CheckpointedSpout", "Component", "ConfigError", "Count",
    "CustomStreamGrouping", "DEFAULT_STREAM", "Duration", "FailedException", "Fields",
    "InvalidTopology", "KeyValueState", "OutputFieldsDeclarer", "ReportedFailedException",
    "SerializationError", "ShellBolt", "ShellSpout", "SquallError", "Spout", "StateProvider",
    "StatefulBolt", "StatefulWindowedBolt", "Topology", "TopologyBuilder", "TopologyContext",
    "Tuple", "TupleWindow", "WindowedBolt", "layered_config",
]
