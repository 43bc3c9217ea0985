"""``hypaware plugins [--json]``: list the installed plugins."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from hypaware.cli.common import error, print_table, tsv
from hypaware.core.errors import PluginError
from hypaware.core.registry import Registry


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "plugins",
        help="list installed plugins",
        description="List every plugin found through the hypaware.plugins entry points: a "
        "table on a terminal, tab-separated lines with a header when piped.",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list instead")
    parser.set_defaults(func=run)


def _tags(tags: frozenset[str]) -> str:
    return ",".join(sorted(tags)) or "-"


def run(args: argparse.Namespace) -> int:
    try:
        registry = Registry.from_entry_points()
    except PluginError as exc:
        error("plugins", exc)
        return 2
    if args.json:
        doc = [
            {
                "name": name,
                "kind": m.kind,
                "provides": sorted(m.provides),
                "requires": sorted(m.requires),
                "supports": sorted(m.supports),
                "from": registry.origin(name),
                "description": m.description,
            }
            for name, m in sorted(registry.items())
        ]
        print(json.dumps(doc, indent=2))
        return 0
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
    if sys.stdout.isatty():
        print_table(rows, sys.stdout)
    else:
        tsv(rows, sys.stdout)
    return 0
