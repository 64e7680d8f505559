"""The ``squall`` command: one click group, thin commands over importable functions.

Failures a person can fix print one clear line (``Error: ...``) and exit 1,
never a traceback.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from . import config as cfg
from .errors import SquallError


def _overrides(pairs: tuple[str, ...]) -> dict[str, Any]:
    try:
        return cfg.parse_cli_overrides(pairs)
    except cfg.ConfigError as exc:
        raise click.ClickException(str(exc)) from None


conf_option = click.option("-c", "--conf", "conf_pairs", multiple=True, metavar="KEY=VALUE",
                           help="Override a config key (value parsed as YAML); repeatable.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Log debug details.")
def cli(verbose: bool) -> None:
    """Squall: Storm-style distributed stream processing in Python."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@cli.command()
@click.argument("topology_file", type=click.Path(dir_okay=False))
@click.option("--duration", type=float, default=None, metavar="SECS",
              help="Stop after SECS seconds (default: run until Ctrl-C).")
@conf_option
def local(topology_file: str, duration: float | None, conf_pairs: tuple[str, ...]) -> None:
    """Run TOPOLOGY_FILE's topology on this machine, its workers as separate processes.

    The file defines topology() returning a TopologyBuilder (and optionally
    CONF and NAME). Ctrl-C drains pending tuples and stops every worker.
    """
    from ..deploy.local import run_local
    try:
        code = run_local(topology_file, duration, _overrides(conf_pairs),
                         echo=lambda s: click.echo(s))
    except SquallError as exc:
        raise click.ClickException(str(exc)) from None
    sys.exit(code)


def main() -> None:
    cli(prog_name="squall")


if __name__ == "__main__":
    main()
