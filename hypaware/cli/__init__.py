"""The ``hypaware`` command line. Each subcommand lives in a module of its own.

A subcommand module defines ``register(subparsers)``, which adds its parser
and sets ``func`` to a callable taking the parsed arguments and returning the
exit status.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from hypaware._version import __version__
from hypaware.cli import logs

__all__ = ["main"]

# Modules under hypaware.cli, in the order their commands appear in --help.
COMMANDS = (
    "check_config",
    "plugins",
    "export",
    "status",
    "retry",
    "reset_progress",
    "query",
    "demo",
)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hypaware",
        description="Export captured data from a local cache into durable sinks.",
    )
    parser.add_argument("--version", action="version", version=f"hypaware {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    for command in sub.choices.values():
        logs.add_arguments(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        with logs.configured(args):
            status: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
