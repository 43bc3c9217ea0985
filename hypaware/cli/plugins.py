"""``hypaware plugins``: list the installed plugins."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from hypaware.core.errors import PluginError
from hypaware.core.registry import Registry


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "plugins",
        help="list installed plugins",
        description="List every plugin found through the hypaware.plugins entry points.",
    )
    parser.set_defaults(func=run)


def _tags(tags: frozenset[str]) -> str:
    return ",".join(sorted(tags)) or "-"


def run(args: argparse.Namespace) -> int:
    try:
        registry = Registry.from_entry_points()
    except PluginError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows = [("NAME", "KIND", "PROVIDES", "REQUIRES", "SUPPORTS", "FROM")]
    for name in sorted(registry):
        m = registry[name]
        rows.append(
            (
                name,
                m.kind,
                _tags(m.provides),
                _tags(m.requires),
                _tags(m.supports),
                registry.origin(name),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0
