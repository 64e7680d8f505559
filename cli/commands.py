"""What the ``squall`` client commands do, as plain functions (``cli/main.py`` only parses
options): ``jar``, ``kill``, ``activate``, ``deactivate``, ``rebalance``, ``list``,
``drpc-client``, ``set_log_level``, ``monitor``, ``profile``, ``debug``.

Each takes the layered conf and an ``echo`` for its output; failures are
:class:`~squall.client.errors.SquallError` s with a message a person can act on, which the
CLI prints as one line. The daemons' commands are in :mod:`squall.cli.daemons`.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
from typing import Any, Callable, Iterable, Mapping

from ..client import config as cfg
from ..client.errors import NimbusUnavailable, SquallError, TopologyNotFound
from ..client.health import last_error_line, topology_health
from ..deploy.topology_file import user_error

Echo = Callable[[str], None]


def one_line(exc: BaseException) -> str:
    """An error's message on one line."""
    return " ".join(str(exc).split()) or type(exc).__name__


# --- jar -------------------------------------------------------------------------------
def run_jar(package: str, module: str, args: list[str], config_path: str | None,
            overrides: Mapping[str, Any]) -> Any:
    """Put ``package`` on sys.path, import ``module`` and call its ``main(args)``.

    The submitter finds the package and the overrides in the environment
    (``SQUALL_PACKAGE``, ``SQUALL_CLI_OVERRIDES``); ``config_path`` becomes ``SQUALL_CONF``.
    """
    from ..client.submitter import ARCHIVE_SUFFIXES

    package = os.path.abspath(package)
    if not (os.path.isdir(package) or package.endswith(ARCHIVE_SUFFIXES)):
        raise SquallError(f"package {package} must be a directory, a .zip or a .pyz "
                          "(or a topology file ending in .py)")
    _jar_environment(package, config_path, overrides)
    # The user's code: its mistakes are one line naming the file and line (not our traceback).
    where = os.path.join(package, *module.split(".")) + ".py"
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.split(".")[0] == e.name.split(".")[0]:
            raise SquallError(f"no module {module!r} in {package}") from None
        raise user_error(where, e, f"importing {module}", code_dir=package) from None
    except SquallError:
        raise
    except Exception as e:
        raise user_error(where, e, f"importing {module}", code_dir=package) from None
    main = getattr(mod, "main", None)
    if not callable(main):
        raise SquallError(f"module {module} ({getattr(mod, '__file__', package)}) has no "
                          "main(args) function to call")
    try:
        return main(list(args))
    except SquallError:
        raise
    except Exception as e:
        raise user_error(where, e, f"running {module}.main", code_dir=package) from None


def _jar_environment(package: str, config_path: str | None, overrides: Mapping[str, Any]) -> None:
    """What the submitter reads: the package, the -c overrides and the squall.yaml."""
    from ..client.submitter import ENV_OVERRIDES, ENV_PACKAGE

    if config_path:
        if not os.path.isfile(config_path):
            raise SquallError(f"config file {config_path} not found")
        os.environ["SQUALL_CONF"] = os.path.abspath(config_path)
    os.environ[ENV_PACKAGE] = package
    os.environ[ENV_OVERRIDES] = json.dumps(dict(overrides))
    if package not in sys.path:
        sys.path.insert(0, package)


def jar_dependencies(requirements: str | None, wheelhouse: str | None) -> None:
    """``--requirements FILE`` and ``--wheelhouse DIR`` for the submitter (absolute: the
    topology's main may change directory); unset when not given, so nothing carries over
    from an earlier jar in this process."""
    from ..client.submitter import ENV_REQUIREMENTS, ENV_WHEELHOUSE

    for var, value in ((ENV_REQUIREMENTS, requirements), (ENV_WHEELHOUSE, wheelhouse)):
        if value:
            os.environ[var] = os.path.abspath(value)
        else:
            os.environ.pop(var, None)


def run_topology_file(path: str, args: list[str], config_path: str | None,
                      overrides: Mapping[str, Any]) -> str:
    """``squall jar FILE.py``: submit the topology a file exposes (``topology()``, ``CONF``,
    ``NAME``: what ``squall local FILE`` runs), its directory as the package. A file with
    a ``main(args)`` of its own is run as ``squall jar DIR MODULE`` runs it."""
    from ..client.submitter import submit_topology
    from ..deploy.topology_file import import_file, load_topology_file

    path = os.path.abspath(path)
    package = os.path.dirname(path)
    _jar_environment(package, config_path, overrides)
    module = import_file(path)  # once: its mistakes are one line naming the file
    if callable(getattr(module, "main", None)):
        return run_jar(package, module.__name__, args, config_path, overrides)
    loaded = load_topology_file(path, args, module)
    return submit_topology(loaded.name, loaded.conf, loaded.topology)


def run_flux(path: str, properties_file: str | None, env_filter: bool, config_path: str | None,
             overrides: Mapping[str, Any]) -> str:
    """``squall jar --flux FILE.yaml``: submit the topology a Flux file declares, its
    directory as the package (resources/ beside it holds shell components' scripts)."""
    from ..client.submitter import submit_topology
    from ..deploy.flux import load_flux

    path = os.path.abspath(path)
    _jar_environment(os.path.dirname(path), config_path, overrides)
    loaded = load_flux(path, properties_file, env_filter)
    return submit_topology(loaded.name, loaded.conf, loaded.topology)


# --- topology requests -----------------------------------------------------------------
def _client(conf: Mapping[str, Any]):
    from ..client.nimbus_client import NimbusClient
    return NimbusClient(conf, timeout=15.0)


def _summary(nimbus, name: str):
    for t in nimbus.list().topologies:
        if t.name == name:
            return t
    return None


def kill(conf: Mapping[str, Any], name: str, wait_secs: int | None, echo: Echo,
         status: Echo | None = None, poll: float = 0.5, extra_secs: float = 60.0,
         clock: Callable[[], float] = time.monotonic, sleep=time.sleep) -> None:
    """Kill ``name`` and count down until Nimbus has removed it (bounded by wait + ``extra_secs``)."""
    status = status or echo
    with _client(conf) as nimbus:
        t = _summary(nimbus, name)
        if t is None:
            raise TopologyNotFound(f"no live topology named {name!r}; `squall list` shows the "
                                   "running ones")
        if wait_secs is None:
            try:
                tconf = json.loads(nimbus.topology_conf(t.id) or "{}")
            except (SquallError, ValueError):
                tconf = {}
            wait = float(tconf.get(cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 30))
        else:
            wait = float(wait_secs)
        nimbus.kill(name, wait_secs)
        echo(f"Killing topology {name} ({t.id}): spouts deactivated, removal in {wait:g} s")
        start = clock()
        shown = None
        away: NimbusUnavailable | None = None
        while True:
            try:
                if _summary(nimbus, name) is None:
                    break
                away = None
            except NimbusUnavailable as e:
                # The kill is stored in ZooKeeper: a restarted (or new leader) Nimbus finishes it.
                if away is None:
                    status(f"  {name}: {one_line(e)}; still waiting for the removal")
                away = e
            elapsed = clock() - start
            if elapsed > wait + extra_secs:
                if away is not None:
                    raise away
                raise SquallError(f"topology {name} is still listed {elapsed:.0f} s after the "
                                  "kill; Nimbus removes it on a later monitor round")
            if away is not None:
                sleep(poll)
                continue
            left = max(0, int(wait - elapsed + 0.999))
            if left != shown:
                status(f"  {name}: removal in {left} s" if left else
                       f"  {name}: waiting for Nimbus to remove it")
                shown = left
            sleep(poll)
    echo(f"Topology {name} killed and removed")


def activate(conf: Mapping[str, Any], name: str, echo: Echo) -> None:
    with _client(conf) as nimbus:
        nimbus.activate(name)
    echo(f"Activated topology {name}")


def deactivate(conf: Mapping[str, Any], name: str, echo: Echo) -> None:
    with _client(conf) as nimbus:
        nimbus.deactivate(name)
    echo(f"Deactivated topology {name}")


def parse_executors(pairs: Iterable[str]) -> dict[str, int]:
    """``["count=4"]`` -> ``{"count": 4}``; ValueError naming the bad pair."""
    out: dict[str, int] = {}
    for pair in pairs:
        comp, sep, raw = pair.partition("=")
        comp = comp.strip()
        try:
            n = int(raw)
        except ValueError:
            n = 0
        if not sep or not comp or n < 1:
            raise ValueError(f"expected COMPONENT=N with N >= 1, got {pair!r}")
        out[comp] = n
    return out


def rebalance(conf: Mapping[str, Any], name: str, wait_secs: int | None,
              num_workers: int | None, executors: Mapping[str, int], echo: Echo) -> None:
    with _client(conf) as nimbus:
        nimbus.rebalance(name, wait_secs, num_workers, executors)
    what = []
    if num_workers is not None:
        what.append(f"{num_workers} workers")
    what += [f"{c}={n} executors" for c, n in sorted(executors.items())]
    echo(f"Rebalancing topology {name}" + (f" to {', '.join(what)}" if what else ""))


def format_uptime(secs: int) -> str:
    """``3725`` -> ``"1h2m5s"``."""
    secs = max(0, int(secs))
    d, rem = divmod(secs, 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    parts = [f"{d}d" if d else "", f"{h}h" if h or d else "", f"{m}m" if m or h or d else ""]
    return "".join(parts) + f"{s}s"


def topology_table(topologies: Iterable[Any]) -> list[str]:
    """The lines of ``squall list``'s table (header first)."""
    rows = [("NAME", "ID", "STATUS", "WORKERS", "EXECUTORS", "TASKS", "UPTIME", "HEALTH")]
    for t in topologies:
        rows.append((t.name, t.id, t.status, str(t.num_workers), str(t.num_executors),
                     str(t.num_tasks), format_uptime(t.uptime_secs), topology_health(t)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def list_topologies(conf: Mapping[str, Any], echo: Echo) -> None:
    with _client(conf) as nimbus:
        try:  # the leader: it alone receives heartbeats, so it alone knows the health
            nimbus.prefer_leader()
        except NimbusUnavailable:
            pass  # no leader right now: any Nimbus lists, the health says unknown
        info = nimbus.list()
    if not info.topologies:
        echo("No topologies running.")
    else:
        for line in topology_table(info.topologies):
            echo(line)
        for t in info.topologies:
            line = last_error_line(t)
            if line:
                echo(line)
    used = sum(s.num_used_slots for s in info.supervisors)
    total = sum(s.num_slots for s in info.supervisors)
    echo(f"{len(info.supervisors)} supervisor(s), {used}/{total} slots used")


# --- set_log_level (Storm's `storm set_log_level`) -----------------------------------
def parse_log_levels(specs: Iterable[str]) -> dict[str, tuple[str, int]]:
    """``["squall.worker=DEBUG:60", "ROOT=WARN"]`` -> logger -> (level, timeout_secs; 0
    never)."""
    from ..client.log_levels import level_number

    out: dict[str, tuple[str, int]] = {}
    for spec in specs:
        logger, sep, rest = spec.partition("=")
        level, _, timeout = rest.partition(":")
        if not sep or not logger or not level:
            raise ValueError(f"-l {spec!r}: use LOGGER=LEVEL or LOGGER=LEVEL:TIMEOUT_SECS "
                             "(ROOT is the root logger)")
        level_number(level)  # ValueError names the known levels
        secs = 0
        if timeout:
            try:
                secs = int(timeout)
            except ValueError:
                raise ValueError(f"-l {spec!r}: the timeout {timeout!r} is not whole "
                                 "seconds") from None
            if secs <= 0:
                raise ValueError(f"-l {spec!r}: the timeout must be positive")
        out[logger] = (level.upper(), secs)
    return out


def set_log_level(conf: Mapping[str, Any], name: str, specs: Iterable[str],
                  remove: Iterable[str], echo: Echo) -> None:
    levels = parse_log_levels(specs)
    with _client(conf) as nimbus:
        result = nimbus.set_log_config(name, levels, list(remove))
    if not result.levels:
        echo(f"Topology {name}: no log levels set (every logger at its own level)")
        return
    echo(f"Topology {name}: log levels (the workers apply them within "
         f"{cfg.get(conf, cfg.TOPOLOGY_STATS_FREQ_SECS)} s of their supervisor's next sync):")
    for logger, lv in sorted(result.levels.items()):
        until = (f" until {time.strftime('%H:%M:%S', time.localtime(lv.reset_at_secs))}"
                 if lv.reset_at_secs else "")
        echo(f"  {logger} = {lv.level}{until}")


# --- profile and debug (Storm's UI "Profiling and Debugging") -----------------------------
def _logviewer_url(conf: Mapping[str, Any], host: str, path: str) -> str:
    from ..client.web import scheme_for
    return f"{scheme_for(conf, host)}://{host}:{cfg.get(conf, cfg.LOGVIEWER_PORT)}{path}"


def profile(conf: Mapping[str, Any], name: str, worker: str | None, action: str | None,
            secs: int | None, echo: Echo) -> None:
    """Ask one worker of topology ``name`` for a thread dump, a memory snapshot or a CPU
    profile (or stop one); without a worker, list the workers and the requests pending."""
    from urllib.parse import quote

    from ..client import profiling
    with _client(conf) as nimbus:
        if worker is None:
            info = nimbus.topology_info(name)
            pending = nimbus.pending_profile_actions(name)
            echo(f"Workers of topology {name} ({info.id}):")
            for w in sorted({f"{e.host}:{e.port}" for e in info.executors if e.host}):
                comps = sorted({e.component_id for e in info.executors
                                if f"{e.host}:{e.port}" == w and
                                not e.component_id.startswith("__")})
                echo(f"  {w}  {', '.join(comps)}")
            for r in pending.requests:
                left = r.time_secs + r.secs - time.time()
                state = (f"sampling, {left:.0f} s left" if r.action == "cpu" and left > 0 and
                         any(a.id == r.id for a in pending.active) else "requested")
                echo(f"  request {r.id}: {r.action} of {r.worker} at "
                     f"{time.strftime('%H:%M:%S', time.localtime(r.time_secs))} ({state})")
            return
        if action is None:
            raise ValueError(f"give what to take of {worker}: "
                             f"{', '.join(profiling.ACTIONS)}")
        r = nimbus.set_worker_profiler(name, worker, profiling.canonical_action(action),
                                       secs or 0)
    host = worker.rpartition(":")[0]
    page = _logviewer_url(conf, host,
                          f"/dumps/{quote(r.topology_id, safe='')}/{quote(worker, safe=':')}")
    what = {"threads": "a thread dump", "memory": f"a memory snapshot (tracemalloc; "
            f"{r.secs} s after it starts, or at once if it runs)",
            "cpu": f"a CPU profile of {r.secs} s (flame graph)",
            "stop": "the end of its CPU profile"}[r.action]
    echo(f"Asked worker {worker} of topology {name} for {what} (request {r.id}).")
    if r.action != "stop":
        echo(f"Its file appears in the worker's log directory within a few seconds"
             f"{' after that' if r.secs else ''}: {page}")


def debug(conf: Mapping[str, Any], name: str, component: str | None, pct: float,
          echo: Echo) -> None:
    """Sample ``pct`` percent of the tuples topology ``name`` (or one component) emits into
    its workers' events logs; 0 stops (Storm's debug)."""
    from ..client import profiling
    pct = profiling.check_pct(pct)
    with _client(conf) as nimbus:
        result = nimbus.debug(name, component or "", pct > 0, pct)
    on = {c: o.sampling_pct for c, o in result.component_debug.items() if o.enable}
    off = sorted(c for c, o in result.component_debug.items() if not o.enable)
    if not on:
        echo(f"Topology {name}: debug sampling off")
        return
    parts = [f"{c or 'all components'} {p:g}%" for c, p in sorted(on.items())]
    parts += [f"{c} off" for c in off]
    echo(f"Topology {name}: debug sampling {', '.join(parts)}. Sampled tuples go to each "
         "worker's events log (<topology id>-<port>.events.log), shown by the logviewer's "
         "events page (`squall profile NAME` lists the workers); within a supervisor sync.")


# --- monitor (Storm's `storm monitor`) -----------------------------------------------
def monitor_rows(before: Any, after: Any, secs: float, component: str | None,
                 stream: str | None) -> list[tuple[str, str, int, str, int, float]]:
    """(topology, component, parallelism, stream, emitted in the interval, tuples/s) per
    (component, stream) from two TopologyInfo snapshots ``secs`` apart."""
    prev = {(c.component_id, s): v.emitted for c in before.components
            for s, v in c.streams.items()}
    rows = []
    for c in after.components:
        if c.component_id.startswith("__") and component != c.component_id:
            continue
        if component is not None and c.component_id != component:
            continue
        for s, v in sorted(c.streams.items()):
            if stream is not None and s != stream:
                continue
            delta = max(0, v.emitted - prev.get((c.component_id, s), 0))
            rows.append((after.name, c.component_id, c.num_executors, s, delta,
                         delta / secs if secs > 0 else 0.0))
    return rows


def monitor(conf: Mapping[str, Any], name: str, interval: float, component: str | None,
            stream: str | None, echo: Echo, rounds: int | None = None,
            stop: threading.Event | None = None,
            clock: Callable[[], float] = time.monotonic) -> None:
    """Print each component's emit throughput every ``interval`` seconds, until ``stop`` is
    set (the CLI sets it on Ctrl-C: a KeyboardInterrupt inside a gRPC call can leave the
    channel's threads behind and the process hanging)."""
    stop = stop or threading.Event()
    if interval <= 0:
        raise ValueError(f"-i must be positive, got {interval}")
    with _client(conf) as nimbus:
        info = nimbus.topology_info(name)
        comps = {c.component_id for c in info.components}
        if component is not None and component not in comps:
            raise TopologyNotFound(f"topology {name} has no component {component!r} (it has: "
                                   f"{', '.join(sorted(c for c in comps if not c.startswith('__')))})")
        echo("topology\tcomponent\tparallelism\tstream\ttime-diff ms\temitted\tthroughput (t/s)")
        t0 = clock()
        n = 0
        while rounds is None or n < rounds:
            if stop.wait(interval):
                return
            now = clock()
            nxt = nimbus.topology_info(name)
            if stop.is_set():
                return
            for row in monitor_rows(info, nxt, now - t0, component, stream):
                echo(f"{row[0]}\t{row[1]}\t{row[2]}\t{row[3]}\t{int((now - t0) * 1000)}\t"
                     f"{row[4]}\t{row[5]:.1f}")
            info, t0, n = nxt, now, n + 1


# --- drpc-client (Storm's `storm drpc-client`) ---------------------------------------------
def drpc_execute(conf: Mapping[str, Any], function: str, args: list[str], host: str | None,
                 port: int | None, echo: Echo) -> None:
    """Execute DRPC ``function`` once per argument on ``host`` (default: the first of
    ``drpc.servers``) and echo ``args result`` per line."""
    from ..client.drpc import DRPCClient

    if host is None:
        servers = cfg.get(conf, cfg.DRPC_SERVERS)
        if not servers:
            raise SquallError(f"no DRPC server to call: pass --host or set {cfg.DRPC_SERVERS}")
        host = servers[0]
    with DRPCClient(host, port, conf) as drpc:
        for a in args:
            echo(f"{a} {drpc.execute(function, a)}")
