"""Request decoding every gRPC server of Squall shares (Nimbus, DRPC).

gRPC answers a request whose bytes are not a valid protobuf message with INTERNAL
("Exception deserializing request"), before any of our code runs. Servers register their
generated handlers through :func:`add_tolerant`, so such a request reaches the servicer as
an :class:`Undecodable`, and the servicer's one error boundary answers INVALID_ARGUMENT
naming the call.
"""

from __future__ import annotations

from typing import Any, Callable

import grpc


class Undecodable:
    """What a request that is not a valid message of its call decodes to."""

    def __init__(self, size: int, error: Exception):
        self.size, self.error = size, error

    def message(self, op: str, proto: str) -> str:
        return (f"{op}: the request ({self.size} bytes) is not a valid message of this call "
                f"({type(self.error).__name__}); is the client built from this Squall's "
                f"proto/{proto}?")


def _tolerant(deserialize: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def decode(data: bytes) -> Any:
        try:
            return deserialize(data)
        except Exception as e:  # noqa: BLE001 - whatever the bytes make protobuf raise
            return Undecodable(len(data), e)
    return decode


def add_tolerant(add_generated: Callable[[Any, Any], None], servicer: Any,
                 server: grpc.Server) -> None:
    """``add_generated(servicer, server)`` (a generated ``add_*Servicer_to_server``), with
    every request decoded by a decoder that hands an :class:`Undecodable` on instead of
    failing."""
    class Capture:
        def add_generic_rpc_handlers(self, handlers: Any) -> None:
            pass

        def add_registered_method_handlers(self, service: str, handlers: dict) -> None:
            self.service, self.handlers = service, handlers

    capture = Capture()
    add_generated(servicer, capture)
    handlers = {name: h._replace(request_deserializer=_tolerant(h.request_deserializer))
                for name, h in capture.handlers.items()}
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(capture.service, handlers),))
    server.add_registered_method_handlers(capture.service, handlers)
