"""The one narrow interface to cluster state (ZooKeeper): operations, paths, errors.

Mirrors Storm's ``IStormClusterState``/``StormClusterStateImpl`` over
``IStateStorage``: :class:`ClusterState` holds the domain operations (storms,
assignments, supervisors, errors, nimbuses, leader election) written once
against five storage primitives (read, children, versioned write, atomic
subtree delete, ephemeral put). Two backends implement the primitives, as
Heron's ``statemgrs`` do: :class:`KazooClusterState` (``zk_cluster_state.py``)
in ZooKeeper, and :class:`InMemoryClusterState` (``memory_cluster_state.py``)
in a dict for unit tests and local mode; both are importable from here.

Values are plain JSON-able dicts, stored as UTF-8 JSON (dict keys come back as
strings). Every znode path lives in :class:`Paths`. Backends raise only
:class:`ClusterStateError` and its subclasses, never kazoo's exceptions.
Watches are one-shot (ZooKeeper semantics): the callback gets a
:class:`WatchEvent`, may run on the ZK event thread and must not block — hand
work to the daemon's own loop, then re-read (which re-registers the watch).
"""

from __future__ import annotations

import abc
import json
import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping
from urllib.parse import quote, unquote

from . import config as cfg
from .contract import cut_error
# The errors are part of this interface; they live with the others in errors.py.
from .errors import (NO_NODE, ClusterStateError, NodeTooLarge, NotAllowed, NotFound,  # noqa: F401
                     VersionConflict, ZooKeeperUnavailable)

log = logging.getLogger("squall.cluster_state")

#: How many recent errors each component keeps (Storm's ``reportError`` also keeps 10).
MAX_ERRORS_PER_COMPONENT = 10
#: The most data a write may carry. ZooKeeper's ``jute.maxbuffer`` (1 MiB by default) bounds
#: a whole request, path and header included, and a server that gets a larger one closes the
#: session: every write is checked against this first and refused with NodeTooLarge.
MAX_NODE_BYTES = 1_000_000


def check_node_size(path: str, data: bytes, op: str = "write") -> None:
    """Raise :class:`NodeTooLarge` if ``data`` is more than a node may hold."""
    if len(data) > MAX_NODE_BYTES:
        raise NodeTooLarge(path, len(data), MAX_NODE_BYTES, op)
# --- paths and encoding ---------------------------------------------------------
@dataclass(frozen=True)
class WatchEvent:
    """What a watch callback receives: ``kind`` is created/changed/deleted/child, ``path`` the znode."""

    kind: str
    path: str


Watch = Callable[[WatchEvent], Any]


def _segment(name: str) -> str:
    if not name or name in (".", ".."):
        raise ValueError(f"invalid cluster-state name {name!r}")
    return quote(str(name), safe=":@,=+-_.~")


class Paths:
    """Every znode path, under ``storm.zookeeper.root``; the only place the templates live.

    ``/storms/<id>``               topology status (StormBase): name, owner, status, launch time, ...
    ``/assignments/<id>``          executor -> node+port, node -> host, start times (versioned)
    ``/supervisors/<id>``          ephemeral: host, slots, used slots, uptime
    ``/errors/<id>/<component>``   JSON list of the last :data:`MAX_ERRORS_PER_COMPONENT` errors
    ``/nimbuses/<host:port>``      ephemeral: one per running Nimbus
    ``/logconfigs/<id>``           the topology's dynamic log levels (set_log_level)
    ``/profilerconfig/<id>``       its recent profiler requests (squall profile; bounded,
                                   expiring: client/profiling.py)
    ``/debugoptions/<id>``         its debug sampling per component (squall debug)
    ``/leader-lock``               kazoo ``Election`` for the Nimbus leader
    ``<transactional root>/<namespace>/<state id>/<path>``  Trident's transactional state
                                   (JSON values; ``transactional.zookeeper.root``, default
                                   ``/transactional``), one namespace per topology name and
                                   owner (:func:`tx_namespace`), made by Nimbus
    Names are URL-quoted into one path segment (``/`` cannot split them).
    With ``storm.zookeeper.auth.payload`` (``zk_auth.py``) every node is the cluster's digest
    only, except a topology's namespace and what is below it: its own digest's and the
    cluster's. A topology creates nothing outside its namespace, so it can neither take
    another's state id nor litter the transactional root.
    A conf without ``topology.name`` (a daemon, a test) reads and writes states directly
    under the transactional root, as every topology did before namespaces
    (:meth:`ClusterState.tx_migrate` moves such states into a namespace).
    """

    STORMS, ASSIGNMENTS, SUPERVISORS = "/storms", "/assignments", "/supervisors"
    ERRORS, NIMBUSES, LEADER_LOCK = "/errors", "/nimbuses", "/leader-lock"
    LOGCONFIGS = "/logconfigs"
    PROFILERCONFIG, DEBUGOPTIONS = "/profilerconfig", "/debugoptions"
    SUBTREES = (STORMS, ASSIGNMENTS, SUPERVISORS, ERRORS, NIMBUSES, LOGCONFIGS, PROFILERCONFIG,
                DEBUGOPTIONS)

    def __init__(self, root: str = "/squall", transactional_root: str = "/transactional",
                 tx_namespace: str | None = None):
        #: The root without a trailing slash ('' for ``/``).
        self.root = "/" + root.strip("/") if root.strip("/") else ""
        self.transactional_root = self.root + "/" + transactional_root.strip("/")
        #: Where this process's transactional states live (None: the root itself).
        self.tx_base = self.transactional_root + (f"/{tx_namespace}" if tx_namespace else "")

    def dir(self, subtree: str) -> str:
        return self.root + subtree

    def node(self, subtree: str, *names: str) -> str:
        return self.root + subtree + "".join("/" + _segment(n) for n in names)

    def storm(self, storm_id: str) -> str:
        return self.node(self.STORMS, storm_id)

    def assignment(self, storm_id: str) -> str:
        return self.node(self.ASSIGNMENTS, storm_id)

    def supervisor(self, supervisor_id: str) -> str:
        return self.node(self.SUPERVISORS, supervisor_id)

    def nimbus(self, host_port: str) -> str:
        return self.node(self.NIMBUSES, host_port)

    def errors(self, storm_id: str, component: str | None = None) -> str:
        return self.node(self.ERRORS, storm_id, *([component] if component is not None else []))

    def log_config(self, storm_id: str) -> str:
        return self.node(self.LOGCONFIGS, storm_id)

    def profiler_config(self, storm_id: str) -> str:
        return self.node(self.PROFILERCONFIG, storm_id)

    def debug_options(self, storm_id: str) -> str:
        return self.node(self.DEBUGOPTIONS, storm_id)

    @property
    def leader_lock(self) -> str:
        return self.root + self.LEADER_LOCK

    def transactional(self, state_id: str, path: str = "", base: str | None = None) -> str:
        """A path below a transactional state id (``path``'s slashes separate segments), in
        this process's namespace or below ``base``."""
        parts = [p for p in path.split("/") if p]
        return (self.tx_base if base is None else base) + \
            "".join("/" + _segment(n) for n in [state_id, *parts])

    def tx_namespace_dir(self, name: str, owner: str = "") -> str:
        return self.transactional_root + "/" + tx_namespace(name, owner)


def tx_namespace(name: str, owner: str = "") -> str:
    """The node holding the transactional states of topology ``name`` of ``owner``:
    ``!<owner>!<name>``, each part %-quoted entirely, so no state id (whose quoting leaves
    no ``!``) and no other pair of names can give the same node."""
    return f"!{quote(owner, safe='')}!{quote(name, safe='')}"


def conf_tx_namespace(conf: Mapping[str, Any]) -> str | None:
    """The namespace of the topology a worker's conf belongs to; None without a name."""
    name = conf.get(cfg.TOPOLOGY_NAME)
    if not name:
        return None
    return tx_namespace(str(name), str(conf.get(cfg.TOPOLOGY_SUBMITTER_USER) or ""))


def encode(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def decode(data: bytes, path: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ClusterStateError(f"{path} does not hold JSON: {e}", "decode", path) from e


def connect_string(conf: Mapping[str, Any]) -> str:
    """``host:port,...`` from ``storm.zookeeper.servers`` and ``storm.zookeeper.port``."""
    port = conf.get(cfg.STORM_ZOOKEEPER_PORT) or 2181
    servers = conf.get(cfg.STORM_ZOOKEEPER_SERVERS) or ["127.0.0.1"]
    return ",".join(s if ":" in str(s) else f"{s}:{port}" for s in servers)


# --- the interface ------------------------------------------------------------------
class ClusterState(abc.ABC):
    """Storm's cluster state: the domain operations, over five storage primitives.

    Example::

        with KazooClusterState(conf) as state:
            state.set_storm("wc-1", {"name": "wc", "status": "ACTIVE"})
            assignment, version = state.get_assignment("wc-1", watch=on_change) or ({}, NO_NODE)
            state.set_assignment("wc-1", new, expected_version=version)

    ``suspended`` is true while the connection is not known good (SUSPENDED or
    LOST): a leader must stop acting as one until it turns false again.
    Listeners added with :meth:`add_listener` get "CONNECTED"/"SUSPENDED"/"LOST".
    """

    def __init__(self, conf: Mapping[str, Any] | None = None):
        self.conf = dict(conf or {})
        self.paths = Paths(cfg.get(self.conf, cfg.STORM_ZOOKEEPER_ROOT),
                           cfg.get(self.conf, cfg.TRANSACTIONAL_ZOOKEEPER_ROOT),
                           conf_tx_namespace(self.conf))
        self._suspended = False
        self._listeners: list[Callable[[str], Any]] = []

    # --- storage primitives (one implementation per backend) ---
    @abc.abstractmethod
    def _read(self, path: str, watch: Watch | None) -> tuple[bytes, int] | None:
        """``(data, version)``, or None if absent (the watch then fires on creation)."""

    @abc.abstractmethod
    def _children(self, path: str, watch: Watch | None) -> list[str]:
        """Sorted child names ([] if the node is absent)."""

    @abc.abstractmethod
    def _write(self, path: str, data: bytes, version: int | None) -> int:
        """Create or overwrite (``version=None``), create only (:data:`NO_NODE`) or set at
        ``version``; a failed condition raises :class:`VersionConflict`, data over
        :data:`MAX_NODE_BYTES` :class:`NodeTooLarge`. Returns the new version."""

    @abc.abstractmethod
    def _delete_trees(self, paths: list[str]) -> None:
        """Delete these nodes and their descendants atomically (absent ones are skipped)."""

    @abc.abstractmethod
    def _ephemeral(self, path: str, data: bytes) -> None:
        """Create or update a node that lives as long as this session (re-created after LOST)."""

    @abc.abstractmethod
    def leader_election(self, identifier: str):
        """An election on :attr:`Paths.leader_lock`: ``run(func)`` blocks until leader, then calls func."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection; this instance's ephemeral nodes disappear."""

    def _allow_topology(self, name: str, owner: str) -> None:
        """Make the namespace where the workers of topology ``name`` of ``owner`` keep their
        transactional states (with ACLs, the cluster's and their identity's alone; nothing
        to do otherwise: they create it as they write)."""

    # --- connection state ---
    @property
    def suspended(self) -> bool:
        """True while the connection is SUSPENDED or LOST: assume nothing, do not act as leader."""
        return self._suspended

    def add_listener(self, callback: Callable[[str], Any]) -> None:
        """Call ``callback(state)`` on connection changes (from a helper thread; keep it short)."""
        self._listeners.append(callback)

    def _notify(self, state: str) -> None:
        for callback in list(self._listeners):
            try:
                callback(state)
            except Exception:
                log.exception("cluster-state listener %r failed on %s", callback, state)

    # --- topologies (StormBase) ---
    def set_storm(self, storm_id: str, base: Mapping[str, Any]) -> None:
        """Create or overwrite the topology's status record; first, its workers (named by
        ``base["name"]``) may create transactional state (:meth:`_allow_topology`)."""
        if base.get("name"):
            self._allow_topology(str(base["name"]), str(base.get("owner") or ""))
        self._write(self.paths.storm(storm_id), encode(dict(base)), None)

    def get_storm(self, storm_id: str, watch: Watch | None = None) -> dict | None:
        found = self._read(self.paths.storm(storm_id), watch)
        return None if found is None else decode(found[0], self.paths.storm(storm_id))

    def storm_ids(self, watch: Watch | None = None) -> list[str]:
        return [unquote(n) for n in self._children(self.paths.dir(Paths.STORMS), watch)]

    def remove_storm(self, storm_id: str) -> None:
        """Remove the topology's status, assignment and errors together (one transaction).
        Its transactional states stay: its owner resubmitting it under its name resumes them
        (nobody else can reach them: zk_auth.py)."""
        self._delete_trees([self.paths.errors(storm_id), self.paths.log_config(storm_id),
                            self.paths.profiler_config(storm_id),
                            self.paths.debug_options(storm_id),
                            self.paths.assignment(storm_id), self.paths.storm(storm_id)])

    # --- dynamic log levels (set_log_level) ---
    def set_log_config(self, storm_id: str, config: Mapping[str, Any]) -> None:
        """The topology's log levels: ``{logger: {"level", "reset_at"}}``."""
        self._write(self.paths.log_config(storm_id), encode(dict(config)), None)

    def get_log_config(self, storm_id: str, watch: Watch | None = None) -> dict:
        found = self._read(self.paths.log_config(storm_id), watch)
        return {} if found is None else decode(found[0], self.paths.log_config(storm_id))

    # --- profiling and debugging (squall profile, squall debug: client/profiling.py) ---
    def set_profile_requests(self, storm_id: str, requests: list[Mapping[str, Any]]) -> None:
        """The topology's recent profiler requests (Storm's ``setWorkerProfiler``)."""
        self._write(self.paths.profiler_config(storm_id),
                    encode({"requests": [dict(r) for r in requests]}), None)

    def get_profile_requests(self, storm_id: str, watch: Watch | None = None) -> list[dict]:
        path = self.paths.profiler_config(storm_id)
        found = self._read(path, watch)
        data = {} if found is None else decode(found[0], path)
        reqs = data.get("requests") if isinstance(data, dict) else None
        return [r for r in reqs if isinstance(r, dict)] if isinstance(reqs, list) else []

    def set_debug_options(self, storm_id: str, options: Mapping[str, Any]) -> None:
        """``{component or "" (all): {"enable", "pct"}}`` (Storm's StormBase.component_debug)."""
        self._write(self.paths.debug_options(storm_id), encode(dict(options)), None)

    def get_debug_options(self, storm_id: str, watch: Watch | None = None) -> dict:
        path = self.paths.debug_options(storm_id)
        found = self._read(path, watch)
        data = {} if found is None else decode(found[0], path)
        return data if isinstance(data, dict) else {}

    # --- assignments ---
    def set_assignment(self, storm_id: str, assignment: Mapping[str, Any],
                       expected_version: int | None = None) -> int:
        """Write the assignment; with ``expected_version`` (a version from :meth:`get_assignment`,
        or :data:`NO_NODE`) only if nobody changed it since, else :class:`VersionConflict`.
        Returns the new version."""
        return self._write(self.paths.assignment(storm_id), encode(dict(assignment)), expected_version)

    def get_assignment(self, storm_id: str, watch: Watch | None = None) -> tuple[dict, int] | None:
        path = self.paths.assignment(storm_id)
        found = self._read(path, watch)
        return None if found is None else (decode(found[0], path), found[1])

    def assignment_ids(self, watch: Watch | None = None) -> list[str]:
        return [unquote(n) for n in self._children(self.paths.dir(Paths.ASSIGNMENTS), watch)]

    # --- supervisors and nimbuses (ephemeral) ---
    def register_supervisor(self, supervisor_id: str, info: Mapping[str, Any]) -> None:
        """Create or update this supervisor's ephemeral record (call again as a heartbeat)."""
        self._ephemeral(self.paths.supervisor(supervisor_id), encode(dict(info)))

    def unregister_supervisor(self, supervisor_id: str) -> None:
        """Remove the supervisor's record now (a clean stop; a lost session removes it too)."""
        self._delete_trees([self.paths.supervisor(supervisor_id)])

    def supervisors(self, watch: Watch | None = None) -> dict[str, dict]:
        """Live supervisors by id; ``watch`` fires when one joins or leaves."""
        return self._ephemeral_dir(Paths.SUPERVISORS, watch)

    def register_nimbus(self, host_port: str, info: Mapping[str, Any]) -> None:
        self._ephemeral(self.paths.nimbus(host_port), encode(dict(info)))

    def nimbuses(self, watch: Watch | None = None) -> dict[str, dict]:
        return self._ephemeral_dir(Paths.NIMBUSES, watch)

    def _ephemeral_dir(self, subtree: str, watch: Watch | None) -> dict[str, dict]:
        out = {}
        for name in self._children(self.paths.dir(subtree), watch):
            path = self.paths.dir(subtree) + "/" + name
            found = self._read(path, None)
            if found is not None:  # it may have gone since the listing
                out[unquote(name)] = decode(found[0], path)
        return out

    # --- errors ---
    def report_error(self, storm_id: str, component: str, text: str, time: float,
                     host: str | None = None, port: int | None = None,
                     task: int | None = None) -> None:
        """Append an error to the component's list, keeping the last :data:`MAX_ERRORS_PER_COMPONENT`.

        Workers report concurrently, so this is a compare-and-set loop on the node's version.
        """
        path = self.paths.errors(storm_id, component)
        record = {"error": cut_error(text), "time": time, "host": host, "port": port, "task": task}
        for _ in range(50):
            found = self._read(path, None)
            records, version = ([], NO_NODE) if found is None else (decode(found[0], path), found[1])
            try:
                self._write(path, encode((records + [record])[-MAX_ERRORS_PER_COMPONENT:]), version)
                return
            except VersionConflict:
                continue
        raise VersionConflict(path, version, "report_error")

    def errors(self, storm_id: str, component: str | None = None) -> list[dict]:
        """Recent errors, oldest first: ``{"component", "error", "time", "host", "port", "task"}``
        for one component, or for all of the topology's components merged by time."""
        names = ([_segment(component)] if component is not None
                 else self._children(self.paths.errors(storm_id), None))
        out = []
        for name in names:
            path = self.paths.errors(storm_id) + "/" + name
            found = self._read(path, None)
            for rec in (decode(found[0], path) if found else []):
                out.append(dict(rec, component=unquote(name)))
        return sorted(out, key=lambda r: r["time"])

    # --- Trident's transactional state (client/trident/tx_state.py) ---
    def tx_set(self, state_id: str, path: str, value: Any) -> None:
        """Create or overwrite the JSON value at ``path`` of transactional state ``state_id``."""
        self._write(self.paths.transactional(state_id, path), encode(value), None)

    def tx_get(self, state_id: str, path: str) -> Any:
        """The value at ``path``, or None when it does not exist (or holds nothing)."""
        full = self.paths.transactional(state_id, path)
        found = self._read(full, None)
        return decode(found[0], full) if found is not None and found[0] else None

    def tx_children(self, state_id: str, path: str) -> list[str]:
        """Child names of ``path`` ([] when it does not exist)."""
        return [unquote(n) for n in self._children(self.paths.transactional(state_id, path), None)]

    def tx_delete(self, state_id: str, path: str) -> None:
        """Remove ``path`` and its children; nothing happens if it is gone."""
        self._delete_trees([self.paths.transactional(state_id, path)])

    def tx_migrate(self, state_id: str) -> bool:
        """Move state ``state_id`` left directly under the transactional root (before
        namespaces) into this process's namespace, unless the namespace has it already;
        True if something moved. A legacy state this identity may not read is another
        topology's: left alone. One it may not delete (in a locked ZooKeeper a topology
        has no DELETE on the root) stays behind, copied, readable by its owner and the
        cluster only."""
        legacy = self.paths.transactional(state_id, base=self.paths.transactional_root)
        new = self.paths.transactional(state_id)
        if legacy == new:
            return False
        try:
            if self._read(new, None) is not None or self._read(legacy, None) is None:
                return False
            self._copy_tree(legacy, new)
        except NotAllowed:
            return False
        try:
            self._delete_trees([legacy])
        except NotAllowed:
            pass
        log.info("transactional state %s moved from %s to %s", state_id, legacy, new)
        return True

    def _copy_tree(self, src: str, dst: str) -> None:
        """Copy the node ``src`` and its descendants to ``dst`` (parents first)."""
        found = self._read(src, None)
        if found is None:
            return
        self._write(dst, found[0], None)
        for child in self._children(src, None):
            self._copy_tree(f"{src}/{child}", f"{dst}/{child}")

    def tx_delete_soon(self, state_id: str, path: str) -> None:
        """Remove the leaf ``path`` without waiting for the answer: for values nothing reads
        again (a succeeded txid's metadata). A delete that fails leaves the value to the
        next cleanup after a restart, which reads every txid back. Backends that can
        pipeline it do (ZooKeeper applies one session's requests in order); this default
        deletes now."""
        self.tx_delete(state_id, path)

    def __enter__(self) -> "ClusterState":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def __getattr__(name: str):
    # The backends import this module, so they are re-exported lazily (PEP 562).
    if name == "KazooClusterState":
        from .zk_cluster_state import KazooClusterState
        return KazooClusterState
    if name == "InMemoryClusterState":
        from .memory_cluster_state import InMemoryClusterState
        return InMemoryClusterState
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
