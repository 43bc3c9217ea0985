"""Facts about the package's shape, measured from the tree.

    python tools/house_facts.py [--json] [--limit 60]

- rooms: the subpackages of ``hypaware`` and their modules;
- long functions: every function or method longer than ``--limit`` lines;
- probes: every ``getattr``/``hasattr`` call (the attribute named, and
  whether the name is a literal);
- string dispatch: ``getattr`` with a computed name, and calls that pass a
  method's name as a string to a ``_notify``-style helper.

It reads the source with `ast` only (nothing is imported), so it runs on any
checkout.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent / "hypaware"
DISPATCHERS = {"_notify", "notify", "_emit", "emit", "_call"}


def _modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def rooms() -> dict[str, int]:
    out: dict[str, int] = {}
    for path in _modules():
        rel = path.relative_to(ROOT)
        room = rel.parts[0] if len(rel.parts) > 1 else "(top)"
        out[room] = out.get(room, 0) + 1
    return dict(sorted(out.items()))


def _functions(tree: ast.AST) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                found.append((name, child))
                walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(tree, "")
    return found


def measure(limit: int) -> dict[str, Any]:
    long: list[dict[str, Any]] = []
    probes: list[dict[str, Any]] = []
    dispatch: list[dict[str, Any]] = []
    for path in _modules():
        rel = str(path.relative_to(ROOT.parent))
        tree = ast.parse(path.read_text(), rel)
        for name, fn in _functions(tree):
            length = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            if length > limit:
                long.append({"where": f"{rel}:{fn.lineno}", "function": name, "lines": length})
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            callee = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else None
            )
            if callee in ("getattr", "hasattr") and len(node.args) >= 2:
                attr = node.args[1]
                literal = isinstance(attr, ast.Constant) and isinstance(attr.value, str)
                row = {
                    "where": f"{rel}:{node.lineno}",
                    "call": callee,
                    "name": ast.literal_eval(attr) if literal else ast.unparse(attr),
                    "literal": literal,
                }
                probes.append(row)
                if not literal:
                    dispatch.append(row)
            elif callee in DISPATCHERS and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    dispatch.append(
                        {
                            "where": f"{rel}:{node.lineno}",
                            "call": callee,
                            "name": repr(first.value),
                            "literal": True,
                        }
                    )
    long.sort(key=lambda r: -r["lines"])
    return {
        "rooms": rooms(),
        "modules": len(_modules()),
        "long_functions": long,
        "probes": probes,
        "string_dispatch": dispatch,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--limit", type=int, default=60, help="longest function allowed")
    args = parser.parse_args(argv)
    facts = measure(args.limit)
    if args.json:
        json.dump(facts, sys.stdout, indent=2)
        print()
        return 0
    print(f"rooms: {len(facts['rooms'])}, modules: {facts['modules']}")
    for room, count in facts["rooms"].items():
        print(f"  {room:14} {count}")
    print(f"functions over {args.limit} lines: {len(facts['long_functions'])}")
    for row in facts["long_functions"]:
        print(f"  {row['lines']:4}  {row['function']}  ({row['where']})")
    print(f"getattr/hasattr calls: {len(facts['probes'])}")
    for row in facts["probes"]:
        print(f"  {row['call']}({row['name']})  {row['where']}")
    print(f"string-dispatched calls: {len(facts['string_dispatch'])}")
    for row in facts["string_dispatch"]:
        print(f"  {row['call']}({row['name']})  {row['where']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
