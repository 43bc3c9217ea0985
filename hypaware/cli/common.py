"""What every ``hypaware`` command shares: finding the config, checking it, errors, output.

- The config: ``--config FILE`` on every command that reads one (``check-config``
  also takes it as its one positional argument), else ``$HYPAWARE_CONFIG``.
- Before doing anything, a command runs the same checks as ``check-config``
  (`hypaware.core.checks.check_config`) and exits 2 listing every problem.
- Errors: ``hypaware COMMAND: error: ...`` on stderr, one line per problem.
- Timestamps print in one form, ISO 8601 in UTC with a ``Z``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from hypaware.cli.redact import redact_plans
from hypaware.core.errors import ConfigError, PluginError

__all__ = [
    "CONFIG_ENV",
    "ConfigMissingError",
    "add_config_argument",
    "checked_config",
    "config_path",
    "error",
    "iso_utc",
    "print_table",
]

CONFIG_ENV = "HYPAWARE_CONFIG"


class ConfigMissingError(Exception):
    """No ``--config`` and no ``$HYPAWARE_CONFIG``."""


def add_config_argument(parser: argparse.ArgumentParser, *, positional: bool = False) -> None:
    """``--config FILE`` (and an optional positional FILE), falling back to $HYPAWARE_CONFIG."""
    help_text = f"config file (TOML or JSON; default: ${CONFIG_ENV})"
    parser.add_argument("--config", metavar="FILE", help=help_text)
    if positional:
        parser.add_argument("file", nargs="?", metavar="FILE", help="same as --config FILE")


def config_path(args: argparse.Namespace) -> str:
    """The config file the command was given; `ConfigMissingError` if none."""
    given: list[str] = [
        p for p in (getattr(args, "config", None), getattr(args, "file", None)) if p
    ]
    if len(given) == 2 and given[0] != given[1]:
        raise ConfigMissingError(f"two configs given ({given[0]!r} and {given[1]!r}); give one")
    if given:
        return given[0]
    env = os.environ.get(CONFIG_ENV)
    if env:
        return env
    raise ConfigMissingError(f"no config: give --config FILE or set ${CONFIG_ENV}")


def error(command: str, message: object) -> None:
    """``hypaware COMMAND: error: MESSAGE`` on stderr, one line per line of `message`."""
    for line in str(message).splitlines() or [""]:
        print(f"hypaware {command}: error: {line}", file=sys.stderr)


def problem_lines(
    exc: ConfigError | PluginError | ConfigMissingError, source: str | None
) -> list[str]:
    """One line per problem, each naming the config file (`source`) it is in."""
    lines = [str(p) for p in exc.problems] if isinstance(exc, ConfigError) else [str(exc)]
    if source is None or isinstance(exc, ConfigMissingError):
        return lines
    return [line if source in line else f"{source}: {line}" for line in lines]


def errors(
    command: str,
    exc: ConfigError | PluginError | ConfigMissingError,
    source: str | None = None,
) -> int:
    """Print `exc` the one way every command does; the exit status for it (2)."""
    for line in problem_lines(exc, source):
        error(command, line)
    return 2


def checked_config(command: str, args: argparse.Namespace) -> tuple[Any, Any] | int:
    """(config, plans) after every `check-config` check, or the exit status (2) on problems.

    The secrets of the plans go to the command's log filter from here on
    (`hypaware.cli.redact.redact_plans`), taken from this one resolution.
    """
    from hypaware.core.checks import check_config

    source = None
    try:
        source = config_path(args)
        config, plans = check_config(source)
    except (ConfigError, PluginError, ConfigMissingError) as exc:
        return errors(command, exc, source)
    redact_plans(getattr(args, "log_handler", None), plans)
    return config, plans


def iso_utc(value: datetime | None) -> str | None:
    """`value` as ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``; a naive value is taken as UTC."""
    if value is None:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.replace(tzinfo=None).isoformat() + "Z"


def print_table(rows: Sequence[tuple[str, ...]], stream: TextIO) -> None:
    """Left-aligned columns, each as wide as its widest cell (never cut)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (cell.ljust(w) for cell, w in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip(), file=stream)


def tsv(rows: Iterable[tuple[str, ...]], stream: TextIO) -> None:
    for row in rows:
        print("\t".join(c.replace("\t", " ").replace("\n", " ") for c in row), file=stream)
