"""Trident DRPC streams: Storm's ``TridentTopology.newDRPCStream``.

``t.new_drpc_stream("words")`` is a stream of the requests a DRPC server has for the
function ``words``, with fields ``args`` and ``return-info`` (Storm's). Each batch carries
at most one request (Storm builds a batch per request), so whatever the stream's last
operation outputs for the batch is that request's result: the planner ends the stream in
a :class:`ReturnBatch`, which sends the server the JSON list of those tuples' values
(Storm's ``ReturnResultsReducer``: ``[["the", 12]]``), or ``[]``. A batch retried after a
failure carries the same request again; a request nobody answers ends at its client's
``drpc.request.timeout.secs``.

The requests come through :class:`~squall.client.drpc.DRPCSpout`'s machinery (its fetcher
threads, servers, TLS); a DRPC stream's spout runs one task.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from .. import config as cfg
from .spout import BatchCoordinator, Emitter, TridentSpout

#: The fields of a DRPC stream (Storm's).
DRPC_FIELDS = ["args", "return-info"]


class _Capture:
    """The collector DRPCSpout emits its requests into, kept for the batches to take."""

    def __init__(self) -> None:
        self.requests: list[list[Any]] = []
        self.errors: list[Any] = []

    def emit(self, values: Sequence[Any], msg_id: Any = None, stream: str | None = None) -> list:
        self.requests.append(list(values))
        return []

    def report_error(self, error: Any) -> None:
        self.errors.append(error)


class _DRPCEmitter(Emitter):
    def __init__(self, spout: Any, conf: Mapping[str, Any], context: Any):
        self.spout = spout
        self.got = _Capture()
        spout.open(conf, context, self.got)
        #: txid -> the request its batch carried, until the batch succeeds (a retry of the
        #: txid carries it again).
        self.by_txid: dict[int, list[Any]] = {}

    def emit_batch(self, attempt: Any, metadata: Any, collector: Any) -> None:
        request = self.by_txid.get(attempt.txid)
        if request is None:
            if not self.got.requests:
                self.spout.next_tuple()  # hands over what its fetchers got
            for error in self.got.errors:
                collector.report_error(error)
            self.got.errors.clear()
            if not self.got.requests:
                return  # an empty batch: no request waiting
            request = self.by_txid[attempt.txid] = self.got.requests.pop(0)
        collector.emit(request)

    def success(self, attempt: Any) -> None:
        self.by_txid.pop(attempt.txid, None)

    def close(self) -> None:
        self.spout.close()


class DRPCTridentSpout(TridentSpout):
    """The spout of :meth:`TridentTopology.new_drpc_stream`."""

    def __init__(self, function: str, servers: Sequence[str] | None = None,
                 port: int | None = None):
        from ..drpc.spout import DRPCSpout
        self.function = function
        self.source = DRPCSpout(function, servers, port)  # checks the name

    def get_coordinator(self, tx_state_id: str, conf: Mapping[str, Any],
                        context: Any) -> BatchCoordinator:
        return BatchCoordinator()

    def get_emitter(self, tx_state_id: str, conf: Mapping[str, Any], context: Any) -> Emitter:
        return _DRPCEmitter(self.source, conf, context)

    def output_fields(self) -> list[str]:
        return list(DRPC_FIELDS)


class ReturnBatch:
    """The end of a DRPC stream: per batch, the request's return info (from the stream's
    spout) and the results (from its last operation); at the batch's end the JSON list of
    the results goes to the server that asked. Blocking calls: its component gets a thread
    of its own."""

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        from ..drpc.spout import ReturnResults
        self._send = ReturnResults()
        self._send.prepare(conf, context, None)

    def complete(self, infos: list[str], results: list[list[Any]], out: Any) -> None:
        answer = json.dumps(results, default=str)
        for info in infos:
            if not self._send.deliver(answer, info):
                out.report_error(f"DRPC: the result of a request could not be returned to "
                                 f"its server ({info})")

    def cleanup(self) -> None:
        self._send.cleanup()


THREADED = {cfg.TOPOLOGY_EXECUTOR_THREADED: True}
