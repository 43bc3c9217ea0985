"""The ``hypaware`` command line. Each subcommand lives in a module of its own.

A subcommand module defines ``register(subparsers)``, which adds its parser
and sets ``func`` to a callable taking the parsed arguments and returning the
exit status. `hypaware.cli.common` holds what they share (the config
argument, checks, error lines, timestamps). Every command exits quietly (0)
when its output pipe closes early (``hypaware query ... | head``).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from hypaware._version import __version__
from hypaware.cli import logs

__all__ = ["main", "run"]

# Modules under hypaware.cli, in the order their commands appear in --help.
COMMANDS = (
    "check_config",
    "plugins",
    "export",
    "status",
    "retry",
    "reset_progress",
    "maintain",
    "query",
    "demo",
)


# Command name -> its module under hypaware.cli.
_MODULES = {name.replace("_", "-"): name for name in COMMANDS}


def make_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command-line parser; with `only` (a command's name), that command's alone.

    Each command's module is imported to register it, and some import much
    (queries, the demo): a process that runs one command need not pay for all.
    """
    parser = argparse.ArgumentParser(
        prog="hypaware",
        description="Export captured data from a local cache into durable sinks.",
    )
    parser.add_argument("--version", action="version", version=f"hypaware {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in _MODULES.items():
        if only is None or only == name:
            importlib.import_module(f"{__name__}.{module}").register(sub)
    for command in sub.choices.values():
        logs.add_arguments(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    named = args_in[0] if args_in else None
    parser = make_parser(only=named if named in _MODULES else None)
    args = parser.parse_args(args_in)
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        with logs.configured(args):
            status: int = args.func(args)
            sys.stdout.flush()
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly. Point stdout at devnull
        # so the interpreter's last flush does not fail again on the way out.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0
    return status


def run() -> NoReturn:
    """The ``hypaware`` program: `main`, then exit without a last garbage collection.

    A command has closed everything it opened by the time it returns; what
    is left is memory, freed with the process. The interpreter's collections
    on the way out walk every object of every module loaded (pyarrow,
    pyiceberg, sqlalchemy, pandas when installed): 0.3-0.5 s of a 1.5 s
    ``export --once``. Frozen (`gc.freeze`), those objects are left out of
    them. Code that calls `main` in its own process keeps its collector as
    it was.
    """
    status = main()
    gc.freeze()
    sys.exit(status)


if __name__ == "__main__":  # pragma: no cover
    run()
