"""The ZooKeeper backend of :class:`~squall.client.cluster_state.ClusterState`, through kazoo.

The Python counterpart of Storm's ``ZKStateStorage`` and Heron's
``zkstatemanager.py``: the five storage primitives as kazoo calls, each
bounded in time and retried on transient errors with ``KazooRetry``; a
connection listener that tells SUSPENDED (stop acting as leader) from LOST
(the session and its ephemerals are gone: re-create them once reconnected);
and the one context manager, :meth:`KazooClusterState._translate`, where
kazoo's exceptions become Squall's. With ``storm.zookeeper.auth.payload`` set, the
client authenticates and every node it makes carries digest ACLs (``zk_auth.py``).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from typing import Any, Callable, Iterator, Mapping
from urllib.parse import unquote

from kazoo.client import KazooClient
from kazoo.exceptions import (BadVersionError, ConnectionClosedError, ConnectionLoss,
                              KazooException, NoAuthError, NodeExistsError, NoNodeError,
                              NotEmptyError, OperationTimeoutError, RolledBackError,
                              SessionExpiredError)
from kazoo.protocol.states import EventType, KazooState
from kazoo.retry import ForceRetryError, KazooRetry, RetryFailedError
from kazoo.security import ACL, Permissions

from . import config as cfg
from . import zk_auth
from .cluster_state import (NO_NODE, ClusterState, ClusterStateError, NotAllowed,
                            NotFound, Paths, VersionConflict, Watch, WatchEvent, ZooKeeperUnavailable,
                            check_node_size, connect_string)

log = logging.getLogger("squall.cluster_state")

_KINDS = {EventType.CREATED: "created", EventType.DELETED: "deleted",
          EventType.CHANGED: "changed", EventType.CHILD: "child"}
_UNREACHABLE = (ConnectionLoss, SessionExpiredError, ConnectionClosedError,
                OperationTimeoutError, RetryFailedError)
_STOP = object()


def _open(acls: list[ACL]) -> bool:
    return any(a.id.scheme == "world" for a in acls)


class KazooClusterState(ClusterState):
    """:class:`ClusterState` in ZooKeeper through kazoo; connects in the constructor.

    Example::

        state = KazooClusterState({"storm.zookeeper.servers": ["zk1"], "storm.zookeeper.port": 2181})
        try:
            state.register_supervisor("sup-1", {"host": "h1", "slots": [6700, 6701]})
        finally:
            state.close()

    Connecting waits at most ``connect_timeout`` s (``storm.zookeeper.connection.timeout``
    ms, default 15000), then raises :class:`ZooKeeperUnavailable` naming the address.
    Each later operation is bounded by the same time and retried on transient
    errors (``storm.zookeeper.retry.*``). A passed ``client`` (unstarted or
    started) becomes this object's to start and stop; :meth:`_make_client` is
    the seam to override instead. Thread-safe: kazoo clients are.

    Its ZooKeeper identity comes from the conf (:func:`~squall.client.zk_auth.identity`):
    the cluster's (daemons) makes and locks the daemons' subtrees; a topology's (workers)
    touches only its transactional state, and creates nothing else.
    """

    def __init__(self, conf: Mapping[str, Any] | None = None, client: KazooClient | None = None, *,
                 connect_timeout: float | None = None, session_timeout: float | None = None):
        super().__init__(conf)
        c = self.conf
        #: Who this client is in ZooKeeper (ConfigError now for a bad payload or scheme).
        self.identity = zk_auth.identity(c)
        self._allowed: set[tuple[str, str]] = set()  # topologies whose namespace is made
        #: The ensemble tried, ``host:port,...``.
        self.address = connect_string(c)
        self.connect_timeout = (connect_timeout if connect_timeout is not None
                                else cfg.get(c, cfg.STORM_ZOOKEEPER_CONNECTION_TIMEOUT) / 1000)
        self.session_timeout = (session_timeout if session_timeout is not None
                                else cfg.get(c, cfg.STORM_ZOOKEEPER_SESSION_TIMEOUT) / 1000)
        self._retry = KazooRetry(
            max_tries=int(cfg.get(c, cfg.STORM_ZOOKEEPER_RETRY_TIMES)),
            delay=cfg.get(c, cfg.STORM_ZOOKEEPER_RETRY_INTERVAL) / 1000,
            max_delay=cfg.get(c, cfg.STORM_ZOOKEEPER_RETRY_INTERVAL_CEILING) / 1000,
            deadline=self.connect_timeout)
        self.state = "LOST"  #: last connection state seen: CONNECTED, SUSPENDED or LOST
        self._suspended = True
        self._ephemerals: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._needs_restore = False
        self._closed = False
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._client = client if client is not None else self._make_client()
        self._thread = threading.Thread(target=self._state_loop, name="squall-zk-state", daemon=True)
        self._thread.start()
        self._client.add_listener(self._on_state)
        try:
            self._connect()
        except BaseException:
            self.close()
            raise
        if self._client.connected and self.state == "LOST":  # a started client sends no CONNECTED
            self.state, self._suspended = "CONNECTED", False

    def _make_client(self) -> KazooClient:
        """Build the kazoo client (override in tests or to add TLS)."""
        # Reconnect at least every second while ZooKeeper is away (kazoo's default backs off to an hour).
        # default_acl covers every create: makepath parents, ephemerals, Election's nodes.
        ident = self.identity
        return KazooClient(hosts=self.address, timeout=self.session_timeout,
                           connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
                           auth_data=list(ident.auth_data) or None,
                           default_acl=list(ident.acl) or None)

    def _connect(self) -> None:
        with self._translate("connect", None):
            if not self._client.connected:
                self._client.start(timeout=self.connect_timeout)
            if self.identity.kind == "topology":
                return  # a worker: the daemons made the tree, and it may not write there
            dirs = [self.paths.dir(s) for s in Paths.SUBTREES] + [self.paths.transactional_root]
            for path in dirs:
                self._retry.copy()(lambda p: self._sync(self._client.ensure_path_async(p)), path)
            if self.identity.kind == "cluster":
                self._retry.copy()(self._lock_open_tree)
                self._retry.copy()(self._retire_root_grants)

    @contextlib.contextmanager
    def _translate(self, op: str, path: str | None) -> Iterator[None]:
        """The one place kazoo exceptions become Squall's."""
        what = f"{op} {path}" if path else op
        try:
            yield
        except ClusterStateError:
            raise
        except NoNodeError as e:
            raise NotFound(f"{what}: no such node", op, path) from e
        except BadVersionError as e:
            raise VersionConflict(path or "?", None, op) from e
        except NoAuthError as e:
            raise NotAllowed(
                f"{what}: not allowed by the node's ACL for this client's identity "
                f"({self.identity.kind}; see {cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD})", op, path) from e
        except self._client.handler.timeout_exception as e:
            raise ZooKeeperUnavailable.unreachable(
                self.address, f"{what}: no answer within {self.connect_timeout:g} s", op, path) from e
        except _UNREACHABLE as e:
            raise ZooKeeperUnavailable.unreachable(
                self.address, f"{what} failed: {type(e).__name__} {e}".rstrip(), op, path) from e
        except KazooException as e:
            raise ClusterStateError(f"{what} failed: {type(e).__name__} {e}", op, path) from e

    def _call(self, op: str, path: str, func: Callable, *args) -> Any:
        with self._translate(op, path):
            return self._retry.copy()(func, *args)

    def _sync(self, async_result) -> Any:
        # Bounded: a plain kazoo call waits forever while ZooKeeper stays away.
        return async_result.get(timeout=self.connect_timeout)

    @staticmethod
    def _wrap(watch: Watch | None) -> Callable | None:
        if watch is None:
            return None
        return lambda ev: watch(WatchEvent(_KINDS.get(ev.type, str(ev.type).lower()), ev.path))

    # --- primitives ---
    def _read(self, path: str, watch: Watch | None) -> tuple[bytes, int] | None:
        w = self._wrap(watch)

        def attempt():
            try:
                data, stat = self._sync(self._client.get_async(path, watch=w))
                return data, stat.version
            except NoNodeError:
                # get() leaves no watch on a missing node; exists() does, to catch its creation.
                if w is None or self._sync(self._client.exists_async(path, watch=w)) is None:
                    return None
                raise ForceRetryError()  # created in between: read it
        return self._call("read", path, attempt)

    def _children(self, path: str, watch: Watch | None) -> list[str]:
        w = self._wrap(watch)

        def attempt():
            try:
                return sorted(self._sync(self._client.get_children_async(path, watch=w)))
            except NoNodeError:
                return []
        return self._call("children", path, attempt)

    def _write(self, path: str, data: bytes, version: int | None) -> int:
        check_node_size(path, data)
        z = self._client

        def attempt():
            if version is None:
                try:
                    return self._sync(z.set_async(path, data)).version
                except NoNodeError:
                    pass
            if version is None or version == NO_NODE:
                try:
                    self._sync(z.create_async(path, data, makepath=True))
                    return 0
                except NodeExistsError:
                    if version is None:
                        raise ForceRetryError()  # created in between: overwrite it
                    raise VersionConflict(path, version) from None
            try:
                return self._sync(z.set_async(path, data, version=version)).version
            except (BadVersionError, NoNodeError):
                raise VersionConflict(path, version) from None
        return self._call("write", path, attempt)

    def tx_delete_soon(self, state_id: str, path: str) -> None:
        full = self.paths.transactional(state_id, path)
        try:
            result = self._client.delete_async(full)
        except KazooException as e:  # not connected now: the next cleanup after a restart
            log.warning("could not delete %s (%s); a later cleanup will", full, e)
            return

        def done(r) -> None:  # on kazoo's thread: log only, never a ZooKeeper call
            try:
                r.get_nowait()
            except NoNodeError:
                pass
            except Exception as e:  # noqa: BLE001 (kazoo's errors and connection loss)
                log.warning("could not delete %s (%s: %s); a later cleanup will", full,
                            type(e).__name__, e)
        result.rawlink(done)

    def _delete_trees(self, paths: list[str]) -> None:
        def collect(path: str, out: list[str]) -> None:
            try:
                children = self._sync(self._client.get_children_async(path))
            except NoNodeError:
                return
            for child in children:
                collect(path + "/" + child, out)
            out.append(path)  # children first: ZooKeeper deletes only leaves

        def attempt():
            doomed: list[str] = []
            for p in paths:
                collect(p, doomed)
            if not doomed:
                return
            txn = self._client.transaction()
            for p in doomed:
                txn.delete(p)
            failed = [r for r in self._sync(txn.commit_async())
                      if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
            if failed and isinstance(failed[0], (NoNodeError, NotEmptyError)):
                raise ForceRetryError()  # the tree changed under us: list it again
            if failed:
                raise failed[0]
        self._call("delete", ",".join(paths), attempt)

    def _ephemeral(self, path: str, data: bytes) -> None:
        check_node_size(path, data, "register")
        with self._lock:
            self._ephemerals[path] = data
        self._call("register", path, self._put_ephemeral, path, data)

    def _put_ephemeral(self, path: str, data: bytes) -> None:
        z = self._client
        try:
            self._sync(z.create_async(path, data, ephemeral=True, makepath=True))
            return
        except NodeExistsError:
            pass
        stat = self._sync(z.exists_async(path))
        if stat is None:
            raise ForceRetryError()
        try:
            if stat.owner_session_id == (z.client_id or (None,))[0]:
                self._sync(z.set_async(path, data, version=stat.version))
                return
            # Left by our own expired session (ZooKeeper deletes it only later): replace it.
            self._sync(z.delete_async(path, version=stat.version))
        except (NoNodeError, BadVersionError):
            pass
        raise ForceRetryError()

    # --- ACLs ---
    def _allow_topology(self, name: str, owner: str) -> None:
        """Make topology ``name`` of ``owner`` its namespace below the transactional root:
        the cluster's and its own digest, ALL; nothing for anyone else. It creates its states
        there and nowhere else (it holds no grant on the root)."""
        if self.identity.kind != "cluster" or (name, owner) in self._allowed:
            return
        path = self.paths.tx_namespace_dir(name, owner)
        acl = list(self.identity.acl) + [zk_auth.topology_acl(self.identity.payload, name, owner,
                                                              Permissions.ALL)]

        def attempt():
            try:
                self._sync(self._client.create_async(path, b"", acl=acl, makepath=True))
                log.info("topology %s: its transactional state goes in %s", name, path)
            except NodeExistsError:
                pass  # a resubmission: its states are there
        self._call("allow", path, attempt)
        self._allowed.add((name, owner))

    def _retire_root_grants(self) -> None:
        """Before namespaces, each live topology had CREATE on the transactional root itself
        (and could take another's state id, finding 10 of issue 23): give each its namespace,
        then leave the root to the cluster alone. Their workers move their states over as
        they open them (ClusterState.tx_migrate)."""
        z, root = self._client, self.paths.transactional_root
        acls, stat = self._sync(z.get_acls_async(root))
        if all(a in self.identity.acl for a in acls):
            return
        for base in map(self.get_storm, self.storm_ids()):
            if base and base.get("name"):
                self._allow_topology(str(base["name"]), str(base.get("owner") or ""))
        try:
            self._sync(z.set_acls_async(root, list(self.identity.acl), version=stat.aversion))
        except BadVersionError:
            raise ForceRetryError() from None
        log.info("%s: %d topology grant(s) on the root replaced by per-topology namespaces",
                 root, len(acls) - len(self.identity.acl))

    def _lock_open_tree(self) -> None:
        """Lock the nodes a cluster left open while it ran without auth (an upgrade).

        Runs when the root (``/storms`` for root ``/``) is world-readable, and locks it last,
        so an interrupted run is redone at the next start. Which topology owns each state
        under the transactional root was never recorded: every live topology gets ALL on
        them, so running Trident topologies resume (new states are each topology's own).
        """
        z, p, acl = self._client, self.paths, list(self.identity.acl)
        tops = ([p.root] if p.root else  # root "/": only our own trees, /storms last
                [p.leader_lock, p.transactional_root] + [p.dir(s) for s in Paths.SUBTREES[::-1]])
        if not _open(self._sync(z.get_acls_async(tops[-1]))[0]):
            return
        names = sorted({(s["name"], str(s.get("owner") or ""))
                        for s in map(self.get_storm, self.storm_ids()) if s and s.get("name")})
        payload = self.identity.payload
        tx_states = acl + [zk_auth.topology_acl(payload, n, o, Permissions.ALL)
                           for n, o in names]
        locked: list[str] = []

        def lock(path: str, own: list[ACL]) -> None:
            below = own
            parent, _, name = path.rpartition("/")
            if path == p.transactional_root:
                below = tx_states  # states of before namespaces: whose is not recorded
            elif parent == p.transactional_root and name.startswith("!"):
                owner, _, topology = name[1:].partition("!")  # a namespace: its topology's
                own = below = acl + [zk_auth.topology_acl(payload, unquote(topology),
                                                          unquote(owner), Permissions.ALL)]
            try:
                for child in self._sync(z.get_children_async(path)):
                    lock(path + "/" + child, below)
                if _open(self._sync(z.get_acls_async(path))[0]):
                    self._sync(z.set_acls_async(path, own))
                    locked.append(path)
            except NoNodeError:
                pass  # gone meanwhile (an ephemeral), or never made (the leader lock)

        for top in tops:
            lock(top, acl)
        for n, o in names:  # each live topology's namespace, for its states from now on
            self._allow_topology(n, o)
        log.warning("%d ZooKeeper nodes were open to anyone (the cluster ran without %s); "
                    "locked them: %s%s. Transactional states among them are shared by the "
                    "live topologies %s", len(locked), cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD,
                    ", ".join(locked[:5]), ", ..." if len(locked) > 5 else "",
                    ", ".join(f"{n} (owner {o or '?'})" for n, o in names) or "none")

    def leader_election(self, identifier: str):
        """kazoo's ``Election`` on the leader lock. Its ``run(func)`` leaves leadership when func
        returns; func must return (and give up acting as leader) when :attr:`suspended` turns true."""
        return self._client.Election(self.paths.leader_lock, identifier)

    # --- connection state ---
    def _on_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: only flags and a hand-off, never a ZooKeeper call.
        self.state = str(state)
        self._suspended = state != KazooState.CONNECTED
        if state == KazooState.LOST:
            self._needs_restore = True
        self._events.put(str(state))

    def _state_loop(self) -> None:
        while True:
            state = self._events.get()
            if state is _STOP:
                return
            if state == KazooState.CONNECTED and self._needs_restore:
                self._needs_restore = False
                self._restore_ephemerals()
            self._notify(state)

    def _restore_ephemerals(self) -> None:
        with self._lock:
            todo = dict(self._ephemerals)
        for path, data in todo.items():
            try:
                self._call("restore", path, self._put_ephemeral, path, data)
                log.info("re-created ephemeral %s after session loss", path)
            except ClusterStateError as e:
                if self._closed:
                    return
                # Try again on the next CONNECTED (a new session or a resumed one).
                self._needs_restore = True
                log.warning("could not re-create ephemeral %s: %s", path, e)

    def close(self) -> None:
        """Stop the client (this session's ephemerals go at once) and the state thread; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._client.remove_listener(self._on_state)
        try:
            self._client.stop()
            self._client.close()
        finally:
            self._events.put(_STOP)
            self._thread.join(timeout=self.connect_timeout + 1)
