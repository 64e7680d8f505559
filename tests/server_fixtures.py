"""What the fixtures of the private servers (Redis, NATS, PostgreSQL) share: a session's
server, skipped with the reason only when its package is not installed, and its log's tail
written past the capture when a test that used it failed."""

from __future__ import annotations

from typing import Any, Callable, Iterator


def session_server(installation: Callable[[], Any], unavailable: type[Exception],
                   make: Callable[[], Any]) -> Iterator[Any]:
    """Body of a session-scoped fixture: ``yield from session_server(...)``; the server is
    stopped by pid at the end."""
    import pytest
    try:
        installation()
    except unavailable as e:
        pytest.skip(str(e))
    server = make()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def tail_if_failed(request: Any, failed_before: int, server: Any) -> None:
    """After a test: when it failed, the server's log tail (a passing teardown's output is
    not shown, so it is written past the capture)."""
    if request.session.testsfailed <= failed_before:
        return
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"\n--- {server.NAME} {server.address} log tail "
                            f"({request.node.nodeid}) ---\n{server.log_tail(30)}")
