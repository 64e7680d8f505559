"""Distributed RPC: Storm's ``org.apache.storm.drpc`` in Python.

A DRPC server (``squall drpc``, :mod:`squall.drpc`) takes ``execute(function, args)`` from
clients and hands each request to the topology serving ``function``, which fetches it with a
:class:`DRPCSpout` and answers with :class:`ReturnResults`. :class:`LinearDRPCTopologyBuilder`
builds such a topology from a chain of bolts, with the coordination (:class:`CoordinatedBolt`)
that lets a :class:`BatchBolt` know when all of one request's tuples have arrived. Example::

    builder = LinearDRPCTopologyBuilder("exclaim")
    builder.add_bolt(Exclaim(), 2)
    # submit builder.create_topology() with drpc.servers in its conf, then:
    with DRPCClient("drpc1.example", conf=conf) as drpc:
        drpc.execute("exclaim", "hello")       # -> "hello!"
"""

from .builder import (LinearDRPCInputDeclarer, LinearDRPCTopologyBuilder, JoinResult,
                      PrepareRequest)
from .client import DRPCClient, DRPCExecutionException, DRPCInvocationsClient
from .coordination import (COORDINATED_STREAM_ID, BatchBolt, BatchOutputCollector,
                           CoordinatedBolt)
from .spout import DRPCSpout, ReturnResults

__all__ = [
    "BatchBolt", "BatchOutputCollector", "COORDINATED_STREAM_ID", "CoordinatedBolt",
    "DRPCClient", "DRPCExecutionException", "DRPCInvocationsClient", "DRPCSpout", "JoinResult",
    "LinearDRPCInputDeclarer", "LinearDRPCTopologyBuilder", "PrepareRequest", "ReturnResults",
]
