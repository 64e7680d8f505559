"""Redis fixtures and helpers for tests of Trident's Redis map states.

Fixtures (registered through ``tests/conftest.py``):

``redis_server``  session-scoped :class:`~squall.deploy.redis.LocalRedis`, started once on a free
                  loopback port and stopped by pid at the end; the test is skipped, with the reason,
                  only if Debian's ``redis-server`` package is not installed.
``redis_conf``    a conf dict pointing at it with a unique ``trident.redis.key.prefix``
                  (``squall-test-<hex>:``); the test's keys are deleted afterwards and, if the
                  test failed, Redis's log tail is printed.

Helper to import (``from redis_fixtures import command_calls``): :func:`command_calls` reads the
server's per-command call counters, to count round trips.
"""

from __future__ import annotations

import uuid

import pytest
import redis

from squall.client.trident.state.base import RedisUnavailable
from squall.deploy.redis import LocalRedis, installation
from server_fixtures import session_server, tail_if_failed


def command_calls(client: redis.Redis) -> dict[str, int]:
    """Calls of each command the server has executed since start or ``CONFIG RESETSTAT``."""
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


@pytest.fixture(scope="session")
def redis_server():
    """One LocalRedis for the whole test session."""
    yield from session_server(installation, RedisUnavailable, LocalRedis)


@pytest.fixture
def redis_conf(request, redis_server) -> dict:
    """Conf for this test: the session's Redis and a key prefix of its own."""
    failed_before = request.session.testsfailed
    prefix = f"squall-test-{uuid.uuid4().hex[:12]}:"
    yield redis_server.conf(key_prefix=prefix)
    if redis_server.running():
        client = redis_server.client()
        try:
            keys = list(client.scan_iter(match=prefix + "*"))
            if keys:
                client.unlink(*keys)
        finally:
            client.close()
    tail_if_failed(request, failed_before, redis_server)
