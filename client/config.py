"""The one typed configuration: Storm's key names, their defaults and layering.

Keys keep Storm's dotted names (``topology.message.timeout.secs``) and are
exposed as constants (:data:`TOPOLOGY_MESSAGE_TIMEOUT_SECS`). Every known key
has a type and a default; unknown keys pass through untouched, as Storm lets
topologies carry their own settings.

Layering, lowest first: defaults < ``squall.yaml`` < topology conf < component
conf < ``-c key=value`` on the command line (see :func:`layered`).
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import yaml

from .errors import ConfigError, SquallError


@dataclass(frozen=True)
class Key:
    """A known configuration key: its type(s), default and meaning."""

    name: str
    types: tuple[type, ...]
    default: Any
    doc: str
    nullable: bool = False


_KEYS: dict[str, Key] = {}


def _key(name: str, types: type | tuple[type, ...], default: Any, doc: str,
         nullable: bool = False) -> str:
    if not isinstance(types, tuple):
        types = (types,)
    _KEYS[name] = Key(name, types, default, doc, nullable)
    return name


_NUM = (int, float)

# --- topology --------------------------------------------------------------
TOPOLOGY_WORKERS = _key("topology.workers", int, 1,
                        "Worker processes the topology runs in.")
TOPOLOGY_TASKS = _key(
    "topology.tasks", int, None,
    "A component's task count when set in its conf (Storm's setNumTasks writes it there); "
    "the executors run them between them. Unset: one task per executor.", nullable=True)
TOPOLOGY_ACKER_EXECUTORS = _key(
    "topology.acker.executors", int, None,
    "Acker tasks; unset = one per worker, 0 = reliability off (spout emits are acked at once).",
    nullable=True)
TOPOLOGY_MESSAGE_TIMEOUT_SECS = _key(
    "topology.message.timeout.secs", _NUM, 30,
    "Seconds a spout tuple tree may stay incomplete before it is failed.")
TOPOLOGY_MAX_SPOUT_PENDING = _key(
    "topology.max.spout.pending", int, None,
    "Most tuple trees pending per spout task; next_tuple is not called at the bound. Unset = no bound.",
    nullable=True)
TOPOLOGY_TICK_TUPLE_FREQ_SECS = _key(
    "topology.tick.tuple.freq.secs", _NUM, None,
    "Seconds between tick tuples sent to each bolt task (settable per component). Unset = none.",
    nullable=True)
TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS = _key(
    "topology.enable.message.timeouts", bool, True,
    "Fail tuple trees not completed within topology.message.timeout.secs; false: never fail "
    "them by timeout (spouts and ackers keep them until they complete or fail), as Storm.")
TOPOLOGY_DEBUG = _key("topology.debug", bool, False, "Log every emitted tuple.")
TOPOLOGY_NAME = _key("topology.name", str, None, "The topology's name.", nullable=True)
TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS = _key(
    "topology.batch.flush.interval.millis", _NUM, 1,
    "Most milliseconds a partial batch of tuples waits before it is sent to another worker.")
TOPOLOGY_TRANSFER_BATCH_SIZE = _key(
    "topology.transfer.batch.size", int, 500,
    "Tuples per frame sent to another worker before the batch is flushed.")
TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE = _key(
    "topology.executor.receive.buffer.size", int, 32768,
    "Capacity (tuples) of an executor's receive queue; the water marks are fractions of it.")
TOPOLOGY_BACKPRESSURE_ENABLE = _key(
    "topology.backpressure.enable", bool, True,
    "Throttle spouts while any executor's receive queue is above its high water mark.")
TOPOLOGY_BACKPRESSURE_VIA_MASTER = _key(
    "topology.backpressure.via.master", bool, False,
    "Backpressure through the Topology Master (JStorm's): workers tell the master which of "
    "their components are congested and it pauses only the spouts upstream of them, instead "
    "of every worker telling every other to pause all spouts. A worker's own spouts still "
    "pause at once when it is congested.")
BACKPRESSURE_HIGH_WATERMARK = _key(
    "backpressure.disruptor.high.watermark", _NUM, 0.9,
    "Queue fill fraction at which an executor reports congestion.")
BACKPRESSURE_LOW_WATERMARK = _key(
    "backpressure.disruptor.low.watermark", _NUM, 0.4,
    "Queue fill fraction at which a congested executor reports relief.")
TOPOLOGY_DISABLE_LOADAWARE_MESSAGING = _key(
    "topology.disable.loadaware.messaging", bool, False,
    "Shuffle evenly instead of sending fewer tuples to tasks whose receive queues back up.")
TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL3_SLEEP_MILLIS = _key(
    "topology.spout.wait.progressive.level3.sleep.millis", _NUM, 1,
    "How long a spout first sleeps after next_tuple emitted nothing (Storm's level-3 sleep; "
    "its spin and park levels are off by default); Squall doubles it while the spout goes on "
    "emitting nothing, up to topology.spout.wait.max.millis. Tuples and acks arriving wake "
    "the worker at once; 0 polls the spout again at once.")
TOPOLOGY_SPOUT_WAIT_MAX_MILLIS = _key(
    "topology.spout.wait.max.millis", _NUM, 50,
    "Longest a spout sleeps after next_tuple emitted nothing (the wait grows from "
    "topology.spout.wait.progressive.level3.sleep.millis).")
TOPOLOGY_EXECUTOR_THREADED = _key(
    "topology.executor.threaded", bool, False,
    "Run the component's executors on threads of their own instead of the worker's shared "
    "event loop: set it on components whose user code blocks (network calls, sleeps).")
TOPOLOGY_EXECUTOR_STALL_SECS = _key(
    "topology.executor.stall.secs", _NUM, 10,
    "An executor in one call of user code (next_tuple, execute, ack) longer than this is "
    "named in the topology's health (`squall list`, the UI) and in its worker's log. A "
    "spout whose next_tuple keeps sleeping is moved to a thread of its own either way.")
TOPOLOGY_STATS_FREQ_SECS = _key(
    "topology.stats.freq.secs", _NUM, 1.0,
    "Seconds between a worker's heartbeat/stats file writes.")
TOPOLOGY_FALL_BACK_ON_PICKLE = _key(
    "topology.fall.back.on.java.serialization", bool, False,
    "Pickle tuple values msgpack cannot encode and no serializer is registered for (Storm's "
    "Java-serialization fallback). Off by default: unpickling runs code, so workers accept "
    "pickled values only over encrypted worker traffic; prefer topology.serializers.")
TOPOLOGY_SERIALIZERS = _key(
    "topology.serializers", dict, None,
    "Tuple value types beyond msgpack's: {'module.Class': 'module.Serializer'} (an object with "
    "pack(obj) and unpack(value)) or {'module.Class': ['module.pack', 'module.unpack']}.",
    nullable=True)
TOPOLOGY_MAX_FRAME_BYTES = _key(
    "topology.max.frame.bytes", int, 16 * 1024 * 1024,
    "Largest frame between workers; bigger batches are split, a bigger single tuple is "
    "dropped (its tree fails and replays) and a bigger incoming message is refused.")
TOPOLOGY_ENVIRONMENT = _key("topology.environment", dict, None,
                            "Environment variables for worker processes.", nullable=True)
TOPOLOGY_MULTILANG_SERIALIZER = _key(
    "topology.multilang.serializer", str, "json",
    "Wire format to shell components: 'json' (Storm's JSON lines; "
    "org.apache.storm.multilang.JsonSerializer) or 'msgpack' (pystorm's MsgpackSerializer).")
TOPOLOGY_SHELL_METRICS = _key(
    "topology.shell.metrics", dict, {},
    "A shell component's metrics by name, each 'counter', 'meter', 'histogram' or 'gauge' "
    "(ShellBolt.register_metric); a name its child updates without registering it is a "
    "counter.")
TOPOLOGY_SHELLBOLT_MAX_PENDING = _key(
    "topology.shellbolt.max.pending", int, 100,
    "Most tuples queued to a shell bolt's child; execute waits (backpressure) at the bound.")
TOPOLOGY_SUBPROCESS_TIMEOUT_SECS = _key(
    "topology.subprocess.timeout.secs", _NUM, None,
    "Seconds a shell component's child may stay silent (bolts: no answer to heartbeats; "
    "spouts: no sync) before the worker dies. Unset = supervisor.worker.timeout.secs.",
    nullable=True)
TOPOLOGY_SHUTDOWN_DRAIN_SECS = _key(
    "topology.shutdown.drain.secs", _NUM, 10,
    "On a local stop: most seconds to wait for pending tuple trees after spouts are deactivated.")

# --- cluster (daemons) -----------------------------------------------------
STORM_LOCAL_DIR = _key("storm.local.dir", str, "squall-local",
                       "Directory for daemon and worker state.")
STORM_ZOOKEEPER_SERVERS = _key("storm.zookeeper.servers", list, ["127.0.0.1"],
                               "ZooKeeper hosts.")
STORM_ZOOKEEPER_PORT = _key("storm.zookeeper.port", int, 2181, "ZooKeeper client port.")
STORM_ZOOKEEPER_ROOT = _key("storm.zookeeper.root", str, "/squall", "ZooKeeper root node.")
NIMBUS_SEEDS = _key("nimbus.seeds", list, ["127.0.0.1"], "Nimbus hosts.")
NIMBUS_GRPC_PORT = _key("nimbus.grpc.port", int, 6627, "Nimbus gRPC port.")
NIMBUS_PACKAGE_MAX_BYTES = _key("nimbus.package.max.bytes", int, 256 * 1024 * 1024,
                                "Largest topology package Nimbus accepts, bytes.")
NIMBUS_MONITOR_FREQ_SECS = _key("nimbus.monitor.freq.secs", _NUM, 10,
                                "Seconds between Nimbus's monitor rounds (due kills, unassigned topologies).")
SUPERVISOR_SLOTS_PORTS = _key("supervisor.slots.ports", list, [6700, 6701, 6702, 6703],
                              "Worker ports (slots) of a supervisor.")
SUPERVISOR_MONITOR_FREQUENCY_SECS = _key("supervisor.monitor.frequency.secs", _NUM, 10, "Supervisor full-sync period.")
SUPERVISOR_HEARTBEAT_FREQUENCY_SECS = _key(
    "supervisor.heartbeat.frequency.secs", _NUM, 5,
    "Seconds between a supervisor's reports of its workers' heartbeats to Nimbus.")
NIMBUS_TASK_TIMEOUT_SECS = _key(
    "nimbus.task.timeout.secs", _NUM, 30,
    "Seconds without a newer heartbeat after which Nimbus reassigns a worker's tasks.")
NIMBUS_TASK_LAUNCH_SECS = _key(
    "nimbus.task.launch.secs", _NUM, 120,
    "Seconds after a worker's assignment before Nimbus judges it by its heartbeats.")
NIMBUS_CODE_SYNC_FREQ_SECS = _key(
    "nimbus.code.sync.freq.secs", _NUM, 120,
    "Seconds between a follower Nimbus's checks that it holds every live topology's package "
    "(it also checks when topologies come and go).")
STORM_LOCAL_HOSTNAME = _key("storm.local.hostname", str, None,
                            "Host name this node advertises; unset = 127.0.0.1.", nullable=True)
SUPERVISOR_WORKER_TIMEOUT_SECS = _key(
    "supervisor.worker.timeout.secs", _NUM, 30,
    "Seconds without a newer heartbeat.json after which a supervisor restarts a worker.")
SUPERVISOR_WORKER_START_TIMEOUT_SECS = _key(
    "supervisor.worker.start.timeout.secs", _NUM, 120,
    "Seconds a new worker may take to write its first heartbeat before it is restarted.")
SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS = _key(
    "supervisor.worker.shutdown.sleep.secs", _NUM, 3,
    "Seconds a supervisor waits after SIGTERM before it SIGKILLs a worker.")
SUPERVISOR_WORKER_ADOPT_SECS = _key(
    "supervisor.worker.adopt.secs", _NUM, 10,
    "Seconds a worker keeps running after its supervisor is gone (killed, restarted by its "
    "service manager), for the restarted supervisor to take it back; then it exits. Keep it "
    "under nimbus.task.timeout.secs: a worker still running when Nimbus moves its tasks "
    "runs them twice until it exits. 0: workers exit with their supervisor ('squall local').")

# --- a topology's Python dependencies (client/requirements.py, supervisor/venvs.py) -------
TOPOLOGY_PYTHON_REQUIREMENTS = _key(
    "topology.python.requirements", str, None,
    "The requirements file, a path inside the topology's package, that each supervisor "
    "pip-installs into a virtualenv of the topology's own before launching its workers "
    "(names, extras, versions, markers and --hash only). Set by squall jar from "
    "--requirements or a requirements.txt at the package's root; null: the workers run on "
    "the cluster's interpreter alone.", nullable=True)
TOPOLOGY_PYTHON_WHEELHOUSE = _key(
    "topology.python.wheelhouse", str, None,
    "A directory of wheels inside the package (squall jar --wheelhouse) that the "
    "requirements are installed from, with no package index (pip --no-index --find-links), "
    "for hosts that cannot reach one. Unset: pip uses the index the supervisor host's pip "
    "configuration names.", nullable=True)
SUPERVISOR_VENV_DIR = _key(
    "supervisor.venv.dir", str, None,
    "Where a supervisor keeps topologies' virtualenvs, one per distinct requirements, "
    "wheels and interpreter, shared by every topology and resubmission that needs the same; "
    "unset: <storm.local.dir>/supervisor/venvs.", nullable=True)
SUPERVISOR_VENV_BUILD_TIMEOUT_SECS = _key(
    "supervisor.venv.build.timeout.secs", _NUM, 600,
    "Most seconds one virtualenv build (venv and pip install) may take before it is killed "
    "and reported as the topology's error.")
SUPERVISOR_VENV_CLEANUP_AGE_SECS = _key(
    "supervisor.venv.cleanup.age.secs", _NUM, 86400,
    "A virtualenv no topology assigned to the supervisor has used for this long is deleted "
    "(a resubmission within it reuses the environment without installing anything).")

# --- the ZooKeeper client (client/zk_cluster_state.py) ----------------------------------
STORM_ZOOKEEPER_SESSION_TIMEOUT = _key(
    "storm.zookeeper.session.timeout", _NUM, 20000,
    "ZooKeeper session timeout, milliseconds: a daemon silent this long loses its ephemerals.")
STORM_ZOOKEEPER_CONNECTION_TIMEOUT = _key(
    "storm.zookeeper.connection.timeout", _NUM, 15000,
    "Milliseconds to connect to ZooKeeper, and the bound on each operation.")
STORM_ZOOKEEPER_RETRY_TIMES = _key("storm.zookeeper.retry.times", int, 5,
                                   "Retries of a ZooKeeper operation after a transient error.")
STORM_ZOOKEEPER_RETRY_INTERVAL = _key("storm.zookeeper.retry.interval", _NUM, 1000,
                                      "Milliseconds before the first retry (doubling after).")
STORM_ZOOKEEPER_RETRY_INTERVAL_CEILING = _key(
    "storm.zookeeper.retry.intervalceiling.millis", _NUM, 30000,
    "Longest wait between two retries, milliseconds.")

# Storm's client retries (storm.nimbus.retry.*), here only for a connection that could not be
# made (the call never left): a Nimbus busy at its TLS handshake, a leader just moved. Fewer
# and shorter than Storm's 5 x 2 s..60 s: a command against a stopped Nimbus says so in ~1 s.
STORM_NIMBUS_RETRY_TIMES = _key("storm.nimbus.retry.times", int, 2,
                                "Retries of a Nimbus call whose connection failed, over every "
                                "seed each time.")
STORM_NIMBUS_RETRY_INTERVAL_MILLIS = _key("storm.nimbus.retry.interval.millis", _NUM, 300,
                                          "Milliseconds before the first such retry "
                                          "(doubling after).")
STORM_NIMBUS_RETRY_INTERVALCEILING_MILLIS = _key(
    "storm.nimbus.retry.intervalceiling.millis", _NUM, 2000,
    "Longest wait between two such retries, milliseconds.")

# --- worker logs (worker/logfile.py) ---------------------------------------------------
WORKER_LOG_MAX_BYTES = _key(
    "worker.log.max.bytes", int, 64 * 1024 * 1024,
    "A worker's log (its stderr) moves to <log>.1 past this size; 0 = never rotate.")
WORKER_LOG_BACKUPS = _key("worker.log.backups", int, 4,
                          "Rotated worker logs kept (<log>.1 ... <log>.N).")

# --- the web daemons: UI, logviewer, Prometheus endpoints (client/web.py) -------------
UI_HOST = _key("ui.host", str, "127.0.0.1",
               "Address the UI listens on; a non-loopback address needs HTTPS (squall.tls.*) "
               "unless squall ui is started with --insecure.")
UI_PORT = _key("ui.port", int, 8080, "Port of the UI and its REST API (squall ui).")
LOGVIEWER_HOST = _key("logviewer.host", str, "127.0.0.1",
                      "Address the logviewer listens on; as ui.host.")
LOGVIEWER_CLEANUP_AGE_MINS = _key(
    "logviewer.cleanup.age.mins", _NUM, 10080,
    "Minutes a worker log of a topology no longer running here is kept after its last "
    "write (the supervisor deletes older ones; Storm's logviewer key).")
LOGVIEWER_PORT = _key("logviewer.port", int, 8000,
                      "Port of the logviewer on each supervisor host (squall logviewer).")
SQUALL_HTTP_TOKEN_FILE = _key(
    "squall.http.token.file", str, None,
    "File holding the secret every HTTP port of Squall (UI, logviewer, /metrics) asks for: "
    "'Authorization: Bearer <token>', or ?token=<token> once in a browser (then a cookie). "
    "Make one with: head -c 32 /dev/urandom | base64 > FILE.", nullable=True)
SUPERVISOR_METRICS_PORT = _key(
    "supervisor.metrics.port", int, None,
    "Port of the supervisor's Prometheus /metrics: its own and its workers' metrics "
    "(unset: not served).", nullable=True)
NIMBUS_METRICS_PORT = _key("nimbus.metrics.port", int, None,
                           "Port of Nimbus's Prometheus /metrics (unset: not served).",
                           nullable=True)
SQUALL_METRICS_HOST = _key("squall.metrics.host", str, "127.0.0.1",
                           "Address the /metrics ports of Nimbus and supervisors listen on.")

# --- DRPC (drpc/) ------------------------------------------------------------------------
DRPC_SERVERS = _key(
    "drpc.servers", list, None,
    "Hosts of the DRPC servers: a topology's DRPCSpout fetches requests from each of them.",
    nullable=True)
DRPC_PORT = _key("drpc.port", int, 3772,
                 "Port of the DRPC server's DistributedRPC service (clients' execute).")
DRPC_INVOCATIONS_PORT = _key(
    "drpc.invocations.port", int, 3773,
    "Port of the DRPC server's DistributedRPCInvocations service (topologies fetch requests "
    "and return results).")
DRPC_REQUEST_TIMEOUT_SECS = _key(
    "drpc.request.timeout.secs", _NUM, 600,
    "Seconds a DRPC request may wait for its result before execute fails with a timeout.")
DRPC_BIND_HOST = _key(
    "drpc.bind.host", str, "0.0.0.0",
    "Address both DRPC ports listen on; a non-loopback address needs TLS (squall.tls.*) "
    "unless squall drpc is started with --insecure.")
DRPC_WORKER_THREADS = _key(
    "drpc.worker.threads", int, 64,
    "Threads serving execute: each waits for its request's result, so this bounds the "
    "requests in flight (more queue, up to drpc.queue.size).")
DRPC_INVOCATIONS_THREADS = _key(
    "drpc.invocations.threads", int, 64,
    "Threads serving the invocations port; a DRPCSpout task holds one while it waits for a "
    "request, so keep it above the number of DRPCSpout tasks.")
DRPC_QUEUE_SIZE = _key(
    "drpc.queue.size", int, 128,
    "Calls a DRPC port queues beyond its threads before refusing more (RESOURCE_EXHAUSTED).")
DRPC_AUTHORIZER = _key(
    "drpc.authorizer", str, "simple",
    "Who may use the DRPC ports with TLS: simple (clients: any authenticated principal; "
    "invocations: the cluster's daemons, admins and drpc.invocations.users) or none.")
DRPC_INVOCATIONS_USERS = _key(
    "drpc.invocations.users", list, [],
    "Principals besides nimbus.supervisor.users, nimbus.daemon.users and nimbus.admins that "
    "may fetch DRPC requests and return results (the certificate a DRPC topology's workers "
    "present).")

# --- security: ZooKeeper ACLs, TLS, authorization, bounds (SECURITY.md) ---------------
STORM_ZOOKEEPER_AUTH_SCHEME = _key(
    "storm.zookeeper.auth.scheme", str, "digest",
    "ZooKeeper auth scheme of the daemons (only digest is supported).")
STORM_ZOOKEEPER_AUTH_PAYLOAD = _key(
    "storm.zookeeper.auth.payload", str, None,
    "user:password the daemons authenticate to ZooKeeper with; every znode Squall creates is "
    "then readable and writable by that identity only. Unset = open ACLs (insecure).",
    nullable=True)
STORM_ZOOKEEPER_TOPOLOGY_AUTH_SCHEME = _key(
    "storm.zookeeper.topology.auth.scheme", str, "digest",
    "ZooKeeper auth scheme of a topology's workers (only digest is supported).")
STORM_ZOOKEEPER_TOPOLOGY_AUTH_PAYLOAD = _key(
    "storm.zookeeper.topology.auth.payload", str, None,
    "user:password a topology's workers use in ZooKeeper (Trident's transactional state); "
    "set by the supervisor, derived from the cluster's payload and the topology name.",
    nullable=True)
NIMBUS_BIND_HOST = _key(
    "nimbus.bind.host", str, "0.0.0.0",
    "Address Nimbus's gRPC server listens on; a non-loopback address needs TLS "
    "(squall.tls.*) unless Nimbus is started with --insecure.")
SQUALL_TLS_CA_FILE = _key(
    "squall.tls.ca.file", str, None,
    "PEM CA certificate every daemon and client trusts (deploy/make-certs.sh makes one).",
    nullable=True)
SQUALL_TLS_CERT_FILE = _key(
    "squall.tls.cert.file", str, None,
    "PEM certificate this daemon or user presents; its CN is the principal, its OU values "
    "the principal's groups.", nullable=True)
SQUALL_TLS_KEY_FILE = _key("squall.tls.key.file", str, None,
                           "PEM private key of squall.tls.cert.file.", nullable=True)
NIMBUS_AUTHORIZER = _key(
    "nimbus.authorizer", str, "simple",
    "Who may do what at Nimbus: simple (Storm's SimpleACLAuthorizer; needs TLS) or none.")
NIMBUS_ADMINS = _key("nimbus.admins", list, [], "Principals allowed every operation.")
NIMBUS_ADMINS_GROUPS = _key("nimbus.admins.groups", list, [],
                            "Groups whose members are admins.")
NIMBUS_USERS = _key("nimbus.users", list, None,
                    "Principals allowed to submit topologies; unset = any authenticated user.",
                    nullable=True)
NIMBUS_SUPERVISOR_USERS = _key(
    "nimbus.supervisor.users", list, [],
    "Principals of supervisors: only they may send heartbeats and download packages.")
TOPOLOGY_SUBMITTER_USER = _key(
    "topology.submitter.user", str, None,
    "Who submitted the topology (the authenticated principal); set by Nimbus.", nullable=True)
NIMBUS_DAEMON_USERS = _key(
    "nimbus.daemon.users", list, [],
    "Principals of the Nimbuses: a follower copies topologies from the leader as one.")
TOPOLOGY_USERS = _key("topology.users", list, [],
                      "Principals besides the owner allowed to manage the topology.")
TOPOLOGY_GROUPS = _key("topology.groups", list, [],
                       "Groups whose members may manage the topology.")
SQUALL_SECRET_KEYS = _key(
    "squall.secret.keys", list, [],
    "Extra conf keys whose values are redacted wherever a conf is shown (keys containing "
    "password, secret, token, credential or payload always are).")
NIMBUS_INBOX_JAR_EXPIRATION_SECS = _key(
    "nimbus.inbox.jar.expiration.secs", _NUM, 3600,
    "Seconds an unfinished or unsubmitted upload stays in Nimbus's inbox.")
NIMBUS_INBOX_MAX_BYTES = _key("nimbus.inbox.max.bytes", int, 2 * 1024 ** 3,
                              "Bytes of uploads Nimbus holds at once, all principals.")
NIMBUS_INBOX_MAX_UPLOADS = _key("nimbus.inbox.max.uploads", int, 64,
                                "Open uploads Nimbus holds at once, all principals.")
NIMBUS_INBOX_MAX_UPLOADS_PER_USER = _key("nimbus.inbox.max.uploads.per.user", int, 8,
                                         "Open uploads one principal may hold at once.")
NIMBUS_INBOX_MAX_BYTES_PER_USER = _key(
    "nimbus.inbox.max.bytes.per.user", int, 512 * 1024 ** 2,
    "Bytes of open uploads one principal may hold at once (one user cannot fill the inbox).")
NIMBUS_TOPOLOGIES_MAX = _key("nimbus.topologies.max", int, 500,
                             "Live topologies a cluster accepts.")
NIMBUS_TOPOLOGIES_PER_USER_MAX = _key("nimbus.topologies.per.user.max", int, 100,
                                      "Live topologies one principal may own.")
NIMBUS_SLOTS_PER_TOPOLOGY = _key("nimbus.slots.perTopology", int, 256,
                                 "Most workers (slots) one topology may ask for.")
NIMBUS_EXECUTORS_PER_TOPOLOGY = _key("nimbus.executors.perTopology", int, 4096,
                                     "Most executors (and tasks) one topology may have.")
TOPOLOGY_CURVE_PUBLIC_KEY = _key(
    "topology.curve.public.key", str, None,
    "The topology's CurveZMQ public key (Z85); set by Nimbus at submit.", nullable=True)
TOPOLOGY_CURVE_SECRET_KEY = _key(
    "topology.curve.secret.key", str, None,
    "The topology's CurveZMQ secret key (Z85); set by Nimbus at submit, handed to the "
    "topology's workers by their supervisors, redacted everywhere else.", nullable=True)
STORM_MESSAGING_CURVE = _key(
    "storm.messaging.curve", bool, True,
    "Encrypt and authenticate worker-to-worker traffic with CurveZMQ (a key pair per "
    "topology); off only for measurements on a trusted network.")

# --- Trident (client/trident/) -----------------------------------------------------------
TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS = _key(
    "topology.trident.batch.emit.interval.millis", _NUM, 500,
    "Milliseconds between two batches started by a Trident master coordinator.")
TRANSACTIONAL_ZOOKEEPER_ROOT = _key(
    "transactional.zookeeper.root", str, "/transactional",
    "Where Trident's transactional state (txids, spout metadata) lives, below "
    "storm.zookeeper.root.")
TRIDENT_TRANSACTIONAL_STATE = _key(
    "trident.transactional.state", str, "zookeeper",
    "Backend of Trident's transactional state: zookeeper, or memory (one worker process "
    "only, for tests: nothing survives a restart).")

# --- Trident state in Redis (client/trident/state/redis_map.py) --------------
TRIDENT_REDIS_HOST = _key("trident.redis.host", str, "127.0.0.1", "Redis host of Trident map states.")
TRIDENT_REDIS_PORT = _key("trident.redis.port", int, 6379, "Redis port of Trident map states.")
TRIDENT_REDIS_DB = _key("trident.redis.db", int, 0, "Redis database number of Trident map states.")
TRIDENT_REDIS_PASSWORD = _key("trident.redis.password", str, None,
                              "Redis password (AUTH); unset = none.", nullable=True)
TRIDENT_REDIS_KEY_PREFIX = _key(
    "trident.redis.key.prefix", str, "squall:trident:",
    "Prefix of the Redis key of each map state's hash (the state's name follows it).")
TRIDENT_REDIS_TIMEOUT_SECS = _key("trident.redis.timeout.secs", _NUM, 5,
                                  "Seconds to connect to Redis and to wait for each reply.")

# --- Kafka (connectors/kafka/) ------------------------------------------------------------
KAFKA_BOOTSTRAP_SERVERS = _key(
    "kafka.bootstrap.servers", str, None,
    "Kafka brokers of a KafkaSpout or KafkaBolt built without bootstrap_servers (host:port, "
    "comma-separated); `squall local` sets it to the broker it starts.", nullable=True)
# --- JDBC (connectors/jdbc/) --------------------------------------------------------------
JDBC_CONF = _key(
    "jdbc.conf", (str, dict), None,
    "The database of a JDBC bolt or JdbcMapState built with JdbcConfig() and no settings: "
    "storm-jdbc's HikariCP map (dataSource.url jdbc:postgresql://..., dataSource.user, "
    "dataSource.password) or a libpq connection string. `squall local` sets it to the "
    "PostgreSQL it starts.", nullable=True)

# --- NATS (connectors/nats/) --------------------------------------------------------------
NATS_SERVERS = _key(
    "nats.servers", (str, list), None,
    "NATS servers of a JetStreamSpout or JetStreamBolt built without servers (nats://host:port, "
    "comma-separated or a list); unset: nats://127.0.0.1:4222. `squall local` sets it to the "
    "server it starts.", nullable=True)
#: Where a Kafka spout tells the UI's lag monitor what it reads, as Storm's KafkaSpout does in
#: its component configuration (``config.topics``, ``config.groupid``, ``config.<consumer
#: property>``); a pattern subscription gives ``config.topics.pattern`` instead of topics.
KAFKA_SPOUT_CONF_PREFIX = "config."


#: Where a Redis stream spout tells the UI's lag endpoint what it reads (its component
#: configuration): the stream, its consumer group, a cluster's seed nodes.
REDIS_STREAM_KEY = "redis.stream.key"
REDIS_STREAM_GROUP = "redis.stream.group"
REDIS_STREAM_NODES = "redis.stream.nodes"


def redis_stream_group(topology_name: str) -> str:
    """A Redis stream spout's consumer group when it names none: one per topology, the same
    for every run of it, so a resubmitted topology goes on where the last one stopped."""
    return f"squall-{topology_name}"


def kafka_group_id(topology_name: str, component: str) -> str:
    """A Kafka spout's consumer group when its config names none: the same for every run of
    the topology, so commits carry over a resubmission."""
    return f"squall-{topology_name}-{component}"

# --- Stateful bolts and windows (client/state.py, client/stateful.py, client/windowing.py)
TOPOLOGY_STATE_PROVIDER = _key(
    "topology.state.provider", str, None,
    "State of stateful bolts: memory, redis, postgres (the JDBC connector), or a StateProvider's package.module.Class "
    "(Storm's provider class names are read too). Unset: redis when "
    "topology.state.provider.config is set, memory otherwise.", nullable=True)
TOPOLOGY_STATE_PROVIDER_CONFIG = _key(
    "topology.state.provider.config", (str, dict), None,
    "Storm's JSON for Redis state: {\"jedisPoolConfig\": {\"host\", \"port\", \"database\", "
    "\"password\", \"timeOut\"}, \"keyPrefix\"}; unset keys come from trident.redis.*.",
    nullable=True)
TOPOLOGY_STATE_CHECKPOINT_INTERVAL = _key(
    "topology.state.checkpoint.interval.ms", _NUM, 1000,
    "Milliseconds between two checkpoints of stateful bolts (at least 100).")
TOPOLOGY_STATE_CHECKPOINT_MODE = _key(
    "topology.state.checkpoint.mode", str, "acker",
    "How stateful bolts checkpoint: acker (Storm's: the checkpoint spout's transactions ride "
    "the acker, and a stateful bolt recognises a replay of what its state holds: "
    "exactly-once), acker-at-least-once (Storm's exactly: replays count again), barrier "
    "(spouts inject barriers that bolts align: exactly-once, no acker), "
    "barrier-at-least-once (barriers without alignment).")
TOPOLOGY_STATE_DEDUPE_RETENTION_SECS = _key(
    "topology.state.dedupe.retention.secs", _NUM, None,
    "Acker checkpointing: seconds a stateful bolt remembers a tuple it saved, to recognise "
    "its replay; unset: twice topology.message.timeout.secs. A spout that re-reads its "
    "source further back than this after a restart gets those messages counted again.",
    nullable=True)
TOPOLOGY_BOLTS_STATEFUL = _key(
    "topology.bolts.stateful", bool, False,
    "Set by the builder on a StatefulBolt (not a windowed one): Nimbus checks that its "
    "inputs reach the same task on a replay (acker checkpointing).")
TOPOLOGY_MASTER_ENABLE = _key(
    "topology.master.enable", bool, True,
    "Run the Topology Master (JStorm's): one system task that gathers the workers' stats into "
    "one summary for Nimbus (and drives barrier checkpoints, which always have it).")
TOPOLOGY_BOLTS_WINDOW_LENGTH_COUNT = _key(
    "topology.bolts.window.length.count", int, None,
    "A windowed bolt's window length in tuples (set by with_window).", nullable=True)
TOPOLOGY_BOLTS_WINDOW_LENGTH_DURATION_MS = _key(
    "topology.bolts.window.length.duration.ms", int, None,
    "A windowed bolt's window length in milliseconds (set by with_window).", nullable=True)
TOPOLOGY_BOLTS_SLIDING_INTERVAL_COUNT = _key(
    "topology.bolts.window.sliding.interval.count", int, None,
    "A windowed bolt's slide in tuples (set by with_window).", nullable=True)
TOPOLOGY_BOLTS_SLIDING_INTERVAL_DURATION_MS = _key(
    "topology.bolts.window.sliding.interval.duration.ms", int, None,
    "A windowed bolt's slide in milliseconds (set by with_window).", nullable=True)
TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME = _key(
    "topology.bolts.tuple.timestamp.field.name", str, None,
    "Event time: the input field holding each tuple's timestamp in milliseconds.",
    nullable=True)
TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_MAX_LAG_MS = _key(
    "topology.bolts.tuple.timestamp.max.lag.ms", int, 0,
    "Event time: how far (ms) the watermark trails the newest timestamp of every input stream.")
TOPOLOGY_BOLTS_WATERMARK_EVENT_INTERVAL_MS = _key(
    "topology.bolts.watermark.event.interval.ms", int, 1000,
    "Event time: milliseconds between two watermarks.")
TOPOLOGY_BOLTS_LATE_TUPLE_STREAM = _key(
    "topology.bolts.late.tuple.stream", str, None,
    "Event time: the stream late tuples (at or before the watermark) go to; unset: they are "
    "dropped (and acked).", nullable=True)

#: Keys of a daemon's conf its workers get beneath the topology conf (as a Storm worker gets
#: the cluster conf), so Trident finds ZooKeeper and Redis and DRPCSpout its servers.
WORKER_INHERITED_PREFIXES = ("storm.zookeeper.", "transactional.zookeeper.", "trident.",
                             "worker.log.", "drpc.", "kafka.", "nats.", "jdbc.")


def worker_inherited(conf: Mapping[str, Any], topology_name: str | None = None,
                     owner: str = "") -> dict[str, Any]:
    """The keys of a daemon's ``conf`` that the workers of topology ``topology_name`` inherit.

    Never the cluster's ZooKeeper password (user code could rewrite ``/assignments`` with
    it): workers get their topology's own identity instead (``zk_auth.worker_auth``:
    ``storm.zookeeper.topology.auth.payload`` and the cluster's digest id), or none
    without a topology name."""
    from .zk_auth import worker_auth  # zk_auth imports this module
    out = {k: v for k, v in conf.items() if k.startswith(WORKER_INHERITED_PREFIXES)}
    out.pop(STORM_ZOOKEEPER_AUTH_PAYLOAD, None)
    out.update(worker_auth(conf, topology_name, owner))
    return out


#: Storm keys renamed here, old name -> new name.
ALIASES: dict[str, str] = {
    "topology.ackers": TOPOLOGY_ACKER_EXECUTORS,
    "topology.max.task.parallelism.pending": TOPOLOGY_MAX_SPOUT_PENDING,
}


#: Where Storm's keys (and Squall's) live: an unknown key there is most likely a typo; keys
#: outside them are the topology's own settings and pass through.
NAMESPACES = ("topology.", "storm.", "nimbus.", "supervisor.", "worker.", "drpc.", "ui.",
              "logviewer.", "pacemaker.", "transactional.", "trident.", "backpressure.",
              "blobstore.", "scheduler.", "task.", "executor.", "kafka.", "nats.")


@functools.cache
def storm_keys() -> frozenset[str]:
    """Every configuration key of Apache Storm 2.8 (``storm_keys.txt`` beside this module)."""
    with open(os.path.join(os.path.dirname(__file__), "storm_keys.txt")) as fh:
        return frozenset(line.strip() for line in fh if line.strip() and not line.startswith("#"))


@functools.cache
def spark_keys() -> tuple[frozenset[str], tuple[str, ...]]:
    """Spark's configuration keys and its free-form families (prefixes such as
    ``spark.hadoop.``), from ``spark_keys.txt`` beside this module (written offline from
    pyspark's jars by ``scripts/spark_keys.py``)."""
    with open(os.path.join(os.path.dirname(__file__), "spark_keys.txt")) as fh:
        lines = [line.strip() for line in fh if line.strip() and not line.startswith("#")]
    return (frozenset(k for k in lines if not k.endswith(".")),
            tuple(k for k in lines if k.endswith(".")))


def spark_key_warning(name: str) -> str | None:
    """What is wrong with ``spark.*`` key ``name``: it is not Spark's but close to one of
    Spark's (a likely typo, ``spark.mastr``); None for Spark's keys, keys in its free-form
    families and keys close to none (connectors and plugins define ``spark.*`` keys of their
    own, which Spark passes on)."""
    keys, families = spark_keys()
    if name in keys or name.startswith(families):
        return None
    close = difflib.get_close_matches(name, keys, n=1, cutoff=0.85)
    if not close:
        return None
    return (f"{name} is not a key Spark knows: did you mean {close[0]}? (it would reach "
            "Spark as it is, and Spark ignores keys it does not know)")


def conf_warnings(conf: Mapping[str, Any], where: str = "") -> list[str]:
    """What to tell the user about the keys of a submitted conf: a Storm key Squall does
    not implement (it has no effect here), a key in Storm's or Squall's namespaces that
    neither knows (a likely typo: the closest known key is suggested), or a ``spark.*`` key
    close to one of Spark's but not Spark's (:func:`spark_key_warning`)."""
    prefix = f"{where}: " if where else ""
    out = []
    for name in sorted(conf):
        if name in _KEYS or name in ALIASES:
            continue
        if isinstance(name, str) and name.startswith("spark."):
            problem = spark_key_warning(name)
            if problem:
                out.append(prefix + problem)
            continue
        if name in storm_keys():
            out.append(f"{prefix}{name} is a Storm key Squall does not implement; it has no "
                       "effect")
        elif name.startswith(NAMESPACES):
            close = difflib.get_close_matches(name, list(_KEYS) + list(storm_keys()), n=1,
                                              cutoff=0.85)
            hint = f": did you mean {close[0]}?" if close else "; it has no effect"
            out.append(f"{prefix}{name} is not a key Squall or Storm knows{hint}")
    return out


#: Set to "1" (by ``squall --strict``, or by hand): a key Squall and Storm do not know, in
#: ``-c`` or in a submitted topology's conf, is refused instead of warned about.
STRICT_ENV = "SQUALL_STRICT"


def strict() -> bool:
    """Whether unknown keys are refused (:data:`STRICT_ENV`)."""
    return os.environ.get(STRICT_ENV) == "1"


def refuse_unknown_keys(conf: Mapping[str, Any], where: str) -> None:
    """Under :func:`strict`, raise SquallError for the first key :func:`conf_warnings`
    names; otherwise nothing (Nimbus warns about them at submit)."""
    if strict():
        problems = conf_warnings(conf, where)
        if problems:
            raise SquallError(problems[0] + " (refused: --strict)")


def known_keys() -> Mapping[str, Key]:
    """Every key Squall knows, by name."""
    return _KEYS


def default(name: str) -> Any:
    """The default of the known key ``name`` (KeyError for an unknown one)."""
    d = _KEYS[name].default
    return list(d) if isinstance(d, list) else d


def get(conf: Mapping[str, Any], name: str) -> Any:
    """``conf[name]``, or the key's default where ``conf`` (not layered) lacks it."""
    value = conf.get(name)
    return default(name) if value is None and not _KEYS[name].nullable else value


def defaults() -> dict[str, Any]:
    """A fresh dict of every known key's default."""
    return {k.name: (list(k.default) if isinstance(k.default, list) else k.default)
            for k in _KEYS.values()}


def check_value(name: str, value: Any) -> None:
    """Raise :class:`ConfigError` when ``value`` does not fit the known key ``name``."""
    key = _KEYS.get(name)
    if key is None:
        return
    if value is None:
        if key.nullable:
            return
        raise ConfigError(name, "must be set (got null)")
    if bool in key.types or not isinstance(value, bool):
        if isinstance(value, key.types):
            return
    expected = " or ".join(t.__name__ for t in key.types)
    raise ConfigError(name, f"expected {expected}, got {type(value).__name__} {value!r}")


#: A conf's deepest nesting of maps and lists (it travels as JSON, is stored in ZooKeeper,
#: and every reader walks it).
MAX_CONF_DEPTH = 32
#: Waits and timeouts travel as int32 seconds.
MAX_WAIT_SECS = 2 ** 31 - 1
#: The largest duration a known key may give: ten years, in its own unit.
MAX_DURATION_SECS = 10 * 365 * 86400
#: Keys whose values name principals or groups (the topology's ACL): strings only.
NAME_LISTS = (TOPOLOGY_USERS, TOPOLOGY_GROUPS, NIMBUS_ADMINS, NIMBUS_ADMINS_GROUPS,
              NIMBUS_USERS, NIMBUS_SUPERVISOR_USERS, NIMBUS_DAEMON_USERS, SQUALL_SECRET_KEYS)
MAX_NAME_LIST = 1000
MAX_NAME_CHARS = 256


def check_shape(conf: Mapping[str, Any]) -> None:
    """Every number in ``conf`` finite, nothing nested deeper than MAX_CONF_DEPTH (any key,
    known or not); raise :class:`ConfigError` naming the key."""
    stack: list[tuple[str, Any, int]] = [(str(k), v, 1) for k, v in conf.items()]
    while stack:
        key, v, depth = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            raise ConfigError(key, f"must be a finite number, got {v}")
        if isinstance(v, (Mapping, list)):
            if depth >= MAX_CONF_DEPTH:
                raise ConfigError(key, f"is nested deeper than {MAX_CONF_DEPTH} levels")
            items = v.values() if isinstance(v, Mapping) else v
            stack.extend((key, x, depth + 1) for x in items)


def _check_ranges(name: str, value: Any) -> None:
    """A known key's value within what its kind allows: names are bounded strings, a
    duration at most ten years."""
    if name in NAME_LISTS and value is not None:
        if len(value) > MAX_NAME_LIST or not all(
                isinstance(x, str) and 0 < len(x) <= MAX_NAME_CHARS for x in value):
            raise ConfigError(name, f"must be a list of up to {MAX_NAME_LIST} names (strings "
                                    f"of 1-{MAX_NAME_CHARS} characters), got "
                                    f"{str(value)[:80]}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        unit = 1000 if name.endswith((".ms", ".millis")) else \
            1 if name.endswith(".secs") else None
        if unit is not None and abs(value) > MAX_DURATION_SECS * unit:
            raise ConfigError(name, f"must be at most {MAX_DURATION_SECS * unit:,} "
                                    f"({'milli' if unit > 1 else ''}seconds: ten years), "
                                    f"got {value}")


def validate(conf: Mapping[str, Any]) -> None:
    """Check every known key in ``conf`` and the few cross-key rules."""
    check_shape(conf)
    for name, value in conf.items():
        check_value(name, value)
        _check_ranges(name, value)
    timeout = conf.get(TOPOLOGY_MESSAGE_TIMEOUT_SECS)
    if timeout is not None and timeout <= 0:
        raise ConfigError(TOPOLOGY_MESSAGE_TIMEOUT_SECS, f"must be > 0, got {timeout}")
    for name in (TOPOLOGY_WORKERS, TOPOLOGY_TRANSFER_BATCH_SIZE, TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE):
        if name in conf and conf[name] < 1:
            raise ConfigError(name, f"must be >= 1, got {conf[name]}")
    for name in (TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL3_SLEEP_MILLIS,
                 TOPOLOGY_SPOUT_WAIT_MAX_MILLIS):  # a wait; the loops would poll at once
        if name in conf and conf[name] < 0:
            raise ConfigError(name, f"must be >= 0, got {conf[name]}")
    ackers = conf.get(TOPOLOGY_ACKER_EXECUTORS)
    if ackers is not None and ackers < 0:
        raise ConfigError(TOPOLOGY_ACKER_EXECUTORS, f"must be >= 0, got {ackers}")
    pending = conf.get(TOPOLOGY_MAX_SPOUT_PENDING)
    if pending is not None and pending < 1:
        raise ConfigError(TOPOLOGY_MAX_SPOUT_PENDING, f"must be >= 1 or unset, got {pending}")
    frame = conf.get(TOPOLOGY_MAX_FRAME_BYTES)
    if frame is not None and not 64 * 1024 <= frame <= 1024 ** 3:
        raise ConfigError(TOPOLOGY_MAX_FRAME_BYTES, f"must be 64 KiB..1 GiB, got {frame}")
    _check_serializers(conf.get(TOPOLOGY_SERIALIZERS))
    for name in (TOPOLOGY_PYTHON_REQUIREMENTS, TOPOLOGY_PYTHON_WHEELHOUSE):
        if conf.get(name) is not None:
            from .requirements import package_path_problem
            problem = package_path_problem(conf[name])
            if problem:
                raise ConfigError(name, problem)
    lo, hi = conf.get(BACKPRESSURE_LOW_WATERMARK), conf.get(BACKPRESSURE_HIGH_WATERMARK)
    if lo is not None and hi is not None and not 0 < lo < hi <= 1:
        raise ConfigError(BACKPRESSURE_HIGH_WATERMARK,
                          f"water marks need 0 < low ({lo}) < high ({hi}) <= 1")


_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
#: Ext codes 16..127 are free for registered types.
MAX_SERIALIZERS = 112


def _check_serializers(spec: Any) -> None:
    """The shape of ``topology.serializers`` (names only: nothing is imported here)."""
    if not spec:
        return
    if len(spec) > MAX_SERIALIZERS:
        raise ConfigError(TOPOLOGY_SERIALIZERS, f"at most {MAX_SERIALIZERS} types, got {len(spec)}")
    for cls, ser in spec.items():
        names = [ser] if isinstance(ser, str) else ser
        shape = isinstance(ser, str) or (isinstance(ser, list) and len(ser) == 2)
        if not shape or not all(isinstance(n, str) and _DOTTED.fullmatch(n)
                                for n in [cls, *names]):
            raise ConfigError(TOPOLOGY_SERIALIZERS,
                              f"entry {cls!r}: {ser!r} is not 'module.Serializer' or "
                              "['module.pack', 'module.unpack'] for a 'module.Class'")


#: Key fragments whose values are secrets (case-insensitive), besides squall.secret.keys.
SECRET_FRAGMENTS = ("password", "passwd", "secret", "token", "credential", "payload",
                    "api_key", "apikey", "access_key", "private_key")
REDACTED = "<redacted>"


def is_secret_key(key: str, extra: Iterable[str] = ()) -> bool:
    low = key.lower()
    return key in extra or any(f in low for f in SECRET_FRAGMENTS)


def redact(conf: Mapping[str, Any], extra_keys: Iterable[str] = ()) -> dict[str, Any]:
    """``conf`` with the values of secret keys replaced (what a conf shows anywhere: the
    API, ``squall`` output, logs, the UI); maps nested in maps and lists are redacted too.
    Secret keys: :data:`SECRET_FRAGMENTS`, the conf's own ``squall.secret.keys`` and
    ``extra_keys`` (the daemon's)."""
    extra = frozenset(conf.get(SQUALL_SECRET_KEYS) or ()) | frozenset(extra_keys)

    def value(k: Any, v: Any) -> Any:
        if k != SQUALL_SECRET_KEYS and v is not None and is_secret_key(str(k), extra):
            return REDACTED
        return walk(v)

    def walk(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {k: value(k, x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str):
            return _redact_text(v, walk)
        return v
    return walk(conf)


# Secrets inside a string value: JSON (Storm's topology.state.provider.config), a libpq
# connection string's password=..., a URL's user:password@, a NATS URL's token@, a URL
# query's password=. A value with none is returned as it was, to the character.
_CONNINFO = re.compile(r"(?:\s*[A-Za-z_][A-Za-z0-9_]*\s*=\s*(?:'(?:[^'\\]|\\.)*'|\S+))+\s*")
_DSN_PASSWORD = re.compile(r"(\b\w*password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"([a-z][a-z0-9+.-]*://[^/@:\s]*:)[^/@\s]*(@)", re.IGNORECASE)
_URL_TOKEN = re.compile(r"(nats://)[^/@:\s]+(@)", re.IGNORECASE)
_QUERY_SECRET = re.compile(r"([?&](?:\w*password|passwd|token|secret)=)[^&#\s]*",
                           re.IGNORECASE)


def _redact_text(text: str, walk: Any) -> str:
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            parsed = json.loads(stripped)
        except ValueError:
            parsed = None
        if isinstance(parsed, (dict, list)):
            shown = walk(parsed)
            return text if shown == parsed else json.dumps(shown, ensure_ascii=False)
    if "://" in text:
        text = _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED + m.group(2), text)
        text = _URL_TOKEN.sub(lambda m: m.group(1) + REDACTED + m.group(2), text)
        text = _QUERY_SECRET.sub(lambda m: m.group(1) + REDACTED, text)
    if "password" in text.lower() and _CONNINFO.fullmatch(text):
        text = _DSN_PASSWORD.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def normalize(conf: Mapping[str, Any]) -> dict[str, Any]:
    """Copy ``conf`` with renamed Storm keys mapped to their current names."""
    return {ALIASES.get(k, k): v for k, v in conf.items()}


def parse_cli_overrides(pairs: Iterable[str]) -> dict[str, Any]:
    """Parse ``-c key=value`` options; values are YAML (``-c topology.workers=2`` is an int)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(pair, "expected key=value")
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            raise ConfigError(key, f"value {raw!r} is not valid YAML: {exc}") from None
        out[ALIASES.get(key, key)] = value
    return out


def load_yaml(path: str | os.PathLike | None) -> dict[str, Any]:
    """Read a ``squall.yaml``; a missing explicit path is an error, ``None`` means none."""
    if path is None:
        return {}
    try:
        with open(path) as fh:
            data = yaml.safe_load(fh)
    except FileNotFoundError:
        raise ConfigError(str(path), "config file not found") from None
    except IsADirectoryError:
        raise ConfigError(str(path), "is a directory, not a config file (SQUALL_CONF names "
                                     "a squall.yaml)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), f"cannot be read: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), f"not valid YAML: {exc}") from None
    if data is None:  # an empty file
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(str(path), "top level must be a mapping of key: value")
    return normalize(data)


def find_yaml() -> str | None:
    """The ``squall.yaml`` to use: ``$SQUALL_CONF`` or ``./squall.yaml`` when present."""
    env = os.environ.get("SQUALL_CONF")
    if env:
        return env
    return "squall.yaml" if os.path.exists("squall.yaml") else None


def layered(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Merge configuration layers over the defaults, later layers winning, and validate.

    Example::

        conf = layered(load_yaml(find_yaml()), topology_conf, cli_overrides)
    """
    out = defaults()
    for layer in layers:
        if layer:
            out.update(normalize(layer))
    validate(out)
    return out


def component_conf(topology_conf: Mapping[str, Any], component: Mapping[str, Any] | None,
                   cli_overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The conf one component sees: topology conf < component conf < CLI overrides."""
    out = dict(topology_conf)
    if component:
        out.update(normalize(component))
    if cli_overrides:
        out.update(cli_overrides)
    validate(out)
    return out
