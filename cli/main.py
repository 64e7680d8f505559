"""The ``squall`` command: one click group, thin commands over importable functions.

Failures a person can fix print one clear line (``Error: ...``) and exit 1,
never a traceback.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import click

from ..client import config as cfg
from ..client.errors import SquallError


class Seconds(click.ParamType):
    """A positive, finite number of seconds (click's FloatRange lets NaN and inf through)."""

    name = "seconds"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        try:
            secs = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not (0 < secs < float(cfg.MAX_DURATION_SECS)):
            self.fail(f"{value} is not a number of seconds greater than 0 (and less than ten "
                      "years)", param, ctx)
        return secs


def _overrides(pairs: tuple[str, ...], submitted: bool = False) -> dict[str, Any]:
    """The ``-c`` pairs. A key Squall and Storm do not know (a likely typo) is a warning
    with the closest known key, or an error under ``squall --strict``. ``submitted``: the
    pairs go into a topology conf, whose keys Nimbus reports at submit (warn only once)."""
    try:
        out = cfg.parse_cli_overrides(pairs)
    except cfg.ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    problems = cfg.conf_warnings(out, "-c")
    if problems and cfg.strict():
        raise click.ClickException(problems[0] + " (refused: --strict)")
    if not submitted:
        for p in problems:
            click.echo(f"Warning: {p}", err=True)
    return out


def _set_strict(ctx: Any, param: Any, value: bool) -> None:
    # The environment carries it to what the command runs (a jar's main, squall local's
    # submit) as SQUALL_CLI_OVERRIDES carries -c.
    if value:
        os.environ[cfg.STRICT_ENV] = "1"


strict_option = click.option(
    "--strict", is_flag=True, expose_value=False, callback=_set_strict,
    help="Refuse, instead of warning about, a conf key Squall and Storm do not know or a "
         "Storm key Squall does not implement (in -c and in the topology's conf); before or "
         "after the command's name.")
_conf_pairs = click.option("-c", "--conf", "conf_pairs", multiple=True, metavar="KEY=VALUE",
                           help="Override a config key (value parsed as YAML); repeatable.")


def conf_option(fn: Any) -> Any:
    """``-c KEY=VALUE`` and ``--strict``, which judges those keys."""
    return strict_option(_conf_pairs(fn))
config_option = click.option("--config", "config_path", type=click.Path(dir_okay=False),
                             default=None, metavar="PATH",
                             help="squall.yaml to read (default: $SQUALL_CONF, else "
                                  "./squall.yaml when present).")


def _conf(config_path: str | None, conf_pairs: tuple[str, ...]) -> dict[str, Any]:
    """defaults < squall.yaml (--config, $SQUALL_CONF or ./squall.yaml) < -c overrides."""
    try:
        return cfg.layered(cfg.load_yaml(config_path or cfg.find_yaml()), _overrides(conf_pairs))
    except cfg.ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def _run(fn, *args, **kwargs):
    """Call ``fn``; a SquallError (unknown topology, Nimbus or ZooKeeper away) is one line."""
    from . import commands
    try:
        return fn(*args, **kwargs)
    except SquallError as exc:
        raise click.ClickException(commands.one_line(exc)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Log debug details.")
@strict_option
def cli(verbose: bool) -> None:
    """Squall: Storm-style distributed stream processing in Python."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not verbose:
        # kazoo warns on every failed connection attempt; our own messages say what matters.
        logging.getLogger("kazoo").setLevel(logging.ERROR)


flux_options = [
    click.option("--flux", "flux", is_flag=True,
                 help="The file is a Flux YAML topology (Storm's Flux: spouts, bolts, streams)."),
    click.option("--filter", "flux_filter", type=click.Path(dir_okay=False), default=None,
                 metavar="FILE", help="Flux: replace ${name} from this properties file."),
    click.option("--env-filter", "env_filter", is_flag=True,
                 help="Flux: replace ${ENV-NAME} from the environment."),
]


def with_flux_options(fn):
    for option in reversed(flux_options):
        fn = option(fn)
    return fn


@cli.command()
@click.argument("topology_file", type=click.Path(dir_okay=False))
@click.option("--duration", type=Seconds(), default=None, metavar="SECS",
              help="Stop after SECS seconds (default: run until Ctrl-C).")
@click.option("--kafka", is_flag=True,
              help="Start a Kafka broker too (as a file's KAFKA_TOPICS does) and set "
                   "kafka.bootstrap.servers to it.")
@click.option("--keep-logs", is_flag=True,
              help="Keep the run's directory (worker and daemon logs) even after a clean run.")
@with_flux_options
@conf_option
def local(topology_file: str, duration: float | None, kafka: bool, keep_logs: bool,
          flux: bool, flux_filter: str | None, env_filter: bool,
          conf_pairs: tuple[str, ...]) -> None:
    """Run TOPOLOGY_FILE's topology on a private cluster on this machine.

    Starts ZooKeeper, Nimbus and a supervisor, submits the topology (the file
    defines topology() returning a TopologyBuilder, and optionally CONF and
    NAME; with --flux it is a Flux YAML file) and shows its progress and each
    error as it is reported. Ctrl-C drains pending tuples, kills the topology
    and stops every process it started. Exit code 1: a worker's code raised;
    3: tuple trees failed, timed out or never completed. The logs are kept
    (and their folder printed) unless the run was clean.
    """
    from ..deploy.local import run_local  # starts daemons: imported only for `squall local`
    if (flux_filter or env_filter) and not flux:
        raise click.UsageError("--filter and --env-filter go with --flux")
    try:
        code = run_local(topology_file, duration, _overrides(conf_pairs, submitted=True),
                         echo=lambda s: click.echo(s),
                         flux={"filter": flux_filter, "env_filter": env_filter} if flux else None,
                         kafka=kafka, keep_logs=keep_logs)
    except SquallError as exc:
        raise click.ClickException(str(exc)) from None
    sys.exit(code)


def _echo_err(s: str) -> None:
    click.echo(s, err=True)


@cli.command()
@config_option
@conf_option
@click.option("--insecure", is_flag=True,
              help="Listen on a non-loopback nimbus.bind.host without TLS: anyone who reaches "
                   "the port may submit, kill and read every topology.")
def nimbus(config_path: str | None, conf_pairs: tuple[str, ...], insecure: bool) -> None:
    """Run Nimbus and its gRPC service (nimbus.bind.host:nimbus.grpc.port) until SIGINT or
    SIGTERM. A non-loopback address needs squall.tls.* (SECURITY.md) or --insecure."""
    from . import daemons
    daemons.daemon_logging()
    _run(daemons.run_nimbus, _conf(config_path, conf_pairs), echo=_echo_err, insecure=insecure)


@cli.command()
@config_option
@conf_option
def supervisor(config_path: str | None, conf_pairs: tuple[str, ...]) -> None:
    """Run a supervisor (workers on supervisor.slots.ports) until SIGINT or SIGTERM.

    Its workers outlive it by supervisor.worker.adopt.secs, so a supervisor restarted
    within that time takes them back running; `squall kill_workers` stops them now."""
    from . import daemons
    daemons.daemon_logging()
    _run(daemons.run_supervisor, _conf(config_path, conf_pairs), echo=_echo_err)


@cli.command(name="kill_workers")
@config_option
@conf_option
def kill_workers(config_path: str | None, conf_pairs: tuple[str, ...]) -> None:
    """Stop every worker running on this host (under storm.local.dir), as Storm's `storm
    kill_workers`: SIGTERM, then SIGKILL after supervisor.worker.shutdown.sleep.secs. Run it
    after stopping the supervisor, whose workers otherwise run on for
    supervisor.worker.adopt.secs. A supervisor still running launches them again."""
    from ..supervisor.supervisor import kill_workers as kill
    lines = kill(_conf(config_path, conf_pairs))
    for line in lines:
        click.echo(line)
    if not lines:
        click.echo("no worker running here")


@cli.command()
@config_option
@conf_option
@click.option("--insecure", is_flag=True,
              help="Serve plain HTTP on a non-loopback ui.host (the token travels in clear).")
def ui(config_path: str | None, conf_pairs: tuple[str, ...], insecure: bool) -> None:
    """Run the UI and Storm's REST API v1 on ui.host:ui.port (default 127.0.0.1:8080) until
    SIGINT or SIGTERM; prints the URL to open (it carries squall.http.token.file's token)."""
    from . import daemons
    daemons.daemon_logging()
    _run(daemons.run_ui, _conf(config_path, conf_pairs), echo=_echo_err, insecure=insecure)


@cli.command()
@config_option
@conf_option
@click.option("--insecure", is_flag=True,
              help="Serve plain HTTP on a non-loopback logviewer.host.")
def logviewer(config_path: str | None, conf_pairs: tuple[str, ...], insecure: bool) -> None:
    """Serve this host's worker and daemon logs (<storm.local.dir>/logs) on
    logviewer.host:logviewer.port (default 127.0.0.1:8000) until SIGINT or SIGTERM."""
    from . import daemons
    daemons.daemon_logging()
    _run(daemons.run_logviewer, _conf(config_path, conf_pairs), echo=_echo_err,
         insecure=insecure)


@cli.command()
@config_option
@conf_option
@click.option("--insecure", is_flag=True,
              help="Listen on a non-loopback drpc.bind.host without TLS: anyone who reaches "
                   "the ports may read and answer every request.")
def drpc(config_path: str | None, conf_pairs: tuple[str, ...], insecure: bool) -> None:
    """Run the DRPC server until SIGINT or SIGTERM: clients execute on drpc.port (3772),
    topologies fetch requests and return results on drpc.invocations.port (3773). A
    non-loopback drpc.bind.host needs squall.tls.* (SECURITY.md) or --insecure."""
    from . import daemons
    daemons.daemon_logging()
    _run(daemons.run_drpc, _conf(config_path, conf_pairs), echo=_echo_err, insecure=insecure)


@cli.command(name="drpc-client")
@click.argument("function")
@click.argument("args", nargs=-1, required=True)
@click.option("--host", default=None,
              help="DRPC server to call (default: the first of drpc.servers).")
@click.option("--port", type=int, default=None, help="Its port (default: drpc.port).")
@config_option
@conf_option
def drpc_client(function: str, args: tuple[str, ...], host: str | None, port: int | None,
                config_path: str | None, conf_pairs: tuple[str, ...]) -> None:
    """Execute DRPC FUNCTION once per ARGS and print each result (Storm's drpc-client)."""
    from . import commands
    _run(commands.drpc_execute, _conf(config_path, conf_pairs), function, list(args), host,
         port, echo=lambda s: click.echo(s))


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("package", type=click.Path(exists=True))
@click.argument("module", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@with_flux_options
@click.option("--requirements", "requirements", type=click.Path(exists=True, dir_okay=False),
              default=None, metavar="FILE",
              help="pip requirements the workers need (names, versions, extras, markers, "
                   "--hash): shipped in the package, installed by each supervisor into a "
                   "virtualenv of the topology's own. Default: requirements.txt at the "
                   "package's root, if any.")
@click.option("--wheelhouse", "wheelhouse", type=click.Path(exists=True, file_okay=False),
              default=None, metavar="DIR",
              help="Ship DIR's wheels in the package and install the requirements from them "
                   "alone (pip --no-index), for hosts without a package index.")
@config_option
@conf_option
def jar(package: str, module: str | None, args: tuple[str, ...], flux: bool,
        flux_filter: str | None, env_filter: bool, requirements: str | None,
        wheelhouse: str | None, config_path: str | None,
        conf_pairs: tuple[str, ...]) -> None:
    """Submit a topology to the cluster: PACKAGE MODULE [ARGS], FILE.py [ARGS], or
    --flux FILE.yaml.

    With a topology file (what `squall local FILE` runs: topology(), CONF, NAME),
    its directory is the package and the topology is submitted as NAME. With a
    PACKAGE (a directory, .zip or .pyz), MODULE is imported from it and its
    main(ARGS) called; main builds the topology and calls
    squall.client.submitter.submit_topology. With --flux, PACKAGE is a Flux YAML
    file and its directory the package. Options this command does not know
    are passed on in ARGS (put ARGS after `--` to pass -c or --config).

    Python dependencies: --requirements FILE (or a requirements.txt at the
    package's root) and --wheelhouse DIR; the workers run in a virtualenv with
    them, over the cluster's own packages (README: "Dependencies of a topology").
    """
    from . import commands
    commands.jar_dependencies(requirements, wheelhouse)
    if flux:
        if module is not None or args:
            raise click.UsageError("--flux takes the YAML file only")
        _run(commands.run_flux, package, flux_filter, env_filter, config_path,
             _overrides(conf_pairs, submitted=True))
        return
    if flux_filter or env_filter:
        raise click.UsageError("--filter and --env-filter go with --flux")
    if package.endswith(".py") and os.path.isfile(package):
        rest = ([module] if module is not None else []) + list(args)
        _run(commands.run_topology_file, package, rest, config_path,
             _overrides(conf_pairs, submitted=True))
        return
    if module is None:
        raise click.UsageError("give the MODULE to run from PACKAGE (or a topology file)")
    _run(commands.run_jar, package, module, list(args), config_path,
         _overrides(conf_pairs, submitted=True))


wait_option = click.option("-w", "--wait", "wait_secs", type=click.IntRange(min=0), default=None,
                           metavar="SECS",
                           help="Seconds to wait with spouts deactivated first (default: the "
                                "topology's topology.message.timeout.secs).")
name_argument = click.argument("name")


@cli.command(name="set_log_level")
@name_argument
@click.option("-l", "levels", multiple=True, metavar="LOGGER=LEVEL[:TIMEOUT]",
              help="Set LOGGER (ROOT: the root logger) to LEVEL (TRACE, DEBUG, INFO, WARN, "
                   "ERROR, FATAL, OFF), reverting after TIMEOUT seconds if given; repeatable.")
@click.option("-r", "remove", multiple=True, metavar="LOGGER",
              help="Drop LOGGER's setting: its own level comes back; repeatable.")
@config_option
@conf_option
def set_log_level(name: str, levels: tuple[str, ...], remove: tuple[str, ...],
                  config_path: str | None, conf_pairs: tuple[str, ...]) -> None:
    """Change log levels in the running workers of topology NAME (Storm's set_log_level)."""
    from . import commands
    if not levels and not remove:
        raise click.UsageError("give -l LOGGER=LEVEL[:TIMEOUT] or -r LOGGER")
    try:
        _run(commands.set_log_level, _conf(config_path, conf_pairs), name, levels, remove,
             echo=lambda s: click.echo(s))
    except ValueError as e:
        raise click.UsageError(str(e)) from None


@cli.command()
@name_argument
@click.argument("worker", required=False, metavar="[HOST:PORT")
@click.argument("action", required=False, metavar="threads|memory|cpu|stop]")
@click.option("-s", "--secs", type=click.IntRange(1, 600), default=None, metavar="SECS",
              help="memory: seconds from starting tracemalloc to the snapshot; cpu: seconds "
                   "of sampling (default 10).")
@config_option
@conf_option
def profile(name: str, worker: str | None, action: str | None, secs: int | None,
            config_path: str | None, conf_pairs: tuple[str, ...]) -> None:
    """Ask worker HOST:PORT of topology NAME for a thread dump (threads), a memory snapshot
    (memory), a CPU profile as a flame graph (cpu) or the end of one (stop); the file
    appears in the worker's log directory, served by its host's logviewer. Storm's names
    (dumpjstack, dumpheap, start) work too. Without HOST:PORT: the workers and the
    requests pending."""
    from . import commands
    try:
        _run(commands.profile, _conf(config_path, conf_pairs), name, worker, action, secs,
             echo=lambda s: click.echo(s))
    except ValueError as e:
        raise click.UsageError(str(e)) from None


@cli.command()
@name_argument
@click.argument("args", nargs=-1, metavar="[COMPONENT] PCT")
@click.option("--off", is_flag=True, help="Stop sampling (the whole topology, or COMPONENT).")
@config_option
@conf_option
def debug(name: str, args: tuple[str, ...], off: bool, config_path: str | None,
          conf_pairs: tuple[str, ...]) -> None:
    """Log PCT percent (0 to 100; 0 stops) of the tuples topology NAME, or only its
    COMPONENT, emits into its workers' events logs, which the logviewer shows (Storm's
    debug button). A component's own setting wins over the topology's; the topology's
    --off stops them all."""
    from . import commands
    if off:
        if len(args) > 1:
            raise click.UsageError("--off takes at most a COMPONENT")
        component, pct = (args[0] if args else None), "0"
    elif len(args) == 1:
        component, pct = None, args[0]
    elif len(args) == 2:
        component, pct = args
    else:
        raise click.UsageError("give [COMPONENT] PCT, or --off")
    try:
        _run(commands.debug, _conf(config_path, conf_pairs), name, component, pct,
             echo=lambda s: click.echo(s))
    except ValueError as e:
        raise click.UsageError(str(e)) from None


@cli.command()
@name_argument
@click.option("-m", "--component", default=None, help="Only this component.")
@click.option("-s", "--stream", default=None, help="Only this stream (default: all).")
@click.option("-i", "--interval", type=Seconds(), default=4.0, show_default=True,
              help="Seconds between two lines.")
@config_option
@conf_option
def monitor(name: str, component: str | None, stream: str | None, interval: float,
            config_path: str | None, conf_pairs: tuple[str, ...]) -> None:
    """Print the emit throughput of topology NAME's components every interval, until
    Ctrl-C (Storm's monitor)."""
    import signal
    import threading

    from . import commands
    stop = threading.Event()  # Ctrl-C ends the loop between two calls, never inside one
    previous = signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    try:
        _run(commands.monitor, _conf(config_path, conf_pairs), name, interval, component,
             stream, echo=lambda s: click.echo(s), stop=stop)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    finally:
        signal.signal(signal.SIGINT, previous)


@cli.command()
@name_argument
@wait_option
@config_option
@conf_option
def kill(name: str, wait_secs: int | None, config_path: str | None,
         conf_pairs: tuple[str, ...]) -> None:
    """Kill topology NAME: deactivate it, wait, then remove it; shows the countdown."""
    from . import commands
    _run(commands.kill, _conf(config_path, conf_pairs), name, wait_secs,
         echo=lambda s: click.echo(s), status=_echo_err)


@cli.command()
@name_argument
@config_option
@conf_option
def activate(name: str, config_path: str | None, conf_pairs: tuple[str, ...]) -> None:
    """Activate topology NAME: its spouts emit again."""
    from . import commands
    _run(commands.activate, _conf(config_path, conf_pairs), name, echo=lambda s: click.echo(s))


@cli.command()
@name_argument
@config_option
@conf_option
def deactivate(name: str, config_path: str | None, conf_pairs: tuple[str, ...]) -> None:
    """Deactivate topology NAME: its spouts stop emitting; in-flight tuples finish."""
    from . import commands
    _run(commands.deactivate, _conf(config_path, conf_pairs), name, echo=lambda s: click.echo(s))


@cli.command()
@name_argument
@wait_option
@click.option("-n", "--num-workers", type=click.IntRange(min=1), default=None, metavar="WORKERS",
              help="New number of worker processes.")
@click.option("-e", "--executors", "executor_pairs", multiple=True, metavar="COMPONENT=N",
              help="New executor count of a component; repeatable.")
@config_option
@conf_option
def rebalance(name: str, wait_secs: int | None, num_workers: int | None,
              executor_pairs: tuple[str, ...], config_path: str | None,
              conf_pairs: tuple[str, ...]) -> None:
    """Spread topology NAME again over the cluster, optionally with new parallelism."""
    from . import commands
    try:
        executors = commands.parse_executors(executor_pairs)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="-e") from None
    _run(commands.rebalance, _conf(config_path, conf_pairs), name, wait_secs, num_workers,
         executors, echo=lambda s: click.echo(s))


@cli.command()
@click.argument("name")
def quickstart(name: str) -> None:
    """Write a project folder NAME: a topology, its resources/, a test using squall.testing
    and a squall.yaml, which squall local, pytest and squall jar run as written."""
    from ..deploy.quickstart import quickstart as write
    path = _run(write, name)
    click.echo(f"Created {path}/: topology.py, test_topology.py, resources/, squall.yaml, "
               f"README.md\nNext:  cd {path} && pytest && squall local topology.py "
               "--duration 10")


@cli.command()
def version() -> None:
    """Print Squall's version, Python's and where Squall is installed."""
    import platform

    from .. import client
    click.echo(f"Squall {client.__version__} (Python {platform.python_version()}, "
               f"{os.path.dirname(os.path.dirname(os.path.abspath(client.__file__)))})")


@cli.command(name="list")
@config_option
@conf_option
def list_(config_path: str | None, conf_pairs: tuple[str, ...]) -> None:
    """List live topologies: name, id, status, workers, executors, tasks, uptime."""
    from . import commands
    _run(commands.list_topologies, _conf(config_path, conf_pairs), echo=lambda s: click.echo(s))


def main() -> None:
    cli(prog_name="squall")


if __name__ == "__main__":
    main()
