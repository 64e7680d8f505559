"""NATS fixtures for the JetStream connector's tests.

Fixtures (registered through ``tests/conftest.py``):

``nats_server``  session-scoped :class:`~squall.deploy.nats.LocalNats` (JetStream on), started
                 once on a free loopback port and stopped by pid at the end; the test is skipped,
                 with the reason, only if Debian's ``nats-server`` package is not installed.
``nats_stream``  a stream of the test's own (``T<hex>`` on subjects ``t<hex>.>``, file storage),
                 deleted afterwards; if the test failed, the server's log tail is printed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from squall.connectors.nats import NatsUnavailable
from squall.deploy.nats import LocalNats, installation
from server_fixtures import session_server, tail_if_failed


@dataclass
class TestStream:
    __test__ = False  # not a test class
    #: The stream's name.
    name: str
    #: Its subjects' first token: the stream takes ``<prefix>.>``.
    prefix: str
    server: LocalNats

    def subject(self, rest: str) -> str:
        return f"{self.prefix}.{rest}"

    def conf(self, **extra) -> dict:
        return {**self.server.conf(), **extra}


@pytest.fixture(scope="session")
def nats_server():
    """One LocalNats for the whole test session."""
    yield from session_server(installation, NatsUnavailable, LocalNats)


@pytest.fixture
def nats_stream(request, nats_server) -> TestStream:
    """A stream of this test's own on the session's server."""
    failed_before = request.session.testsfailed
    tag = uuid.uuid4().hex[:10]
    stream = TestStream(f"T{tag}", f"t{tag}", nats_server)
    nats_server.create_stream(stream.name, [f"{stream.prefix}.>"])
    yield stream
    if nats_server.running():
        try:
            nats_server.delete_stream(stream.name)
        except Exception:  # the server was restarted elsewhere: nothing of ours left there
            pass
    tail_if_failed(request, failed_before, nats_server)
