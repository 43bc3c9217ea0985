"""Run every benchmark at one size: ``python -m benchmarks [--rows N] [--repeat K]``.

Every module of this package with a ``main(argv)`` is a benchmark; each gets
``--rows N --repeat K``, except the memory one, which exports 5x `--rows` in
one partition (its target is about a large partition), and the import-time
one, which takes no size. ``--only NAME`` / ``--skip NAME`` pick benchmarks.
Exits non-zero if any benchmark misses its target or fails.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import traceback
from pathlib import Path

NOT_BENCHMARKS = {"datagen", "__main__"}


def discover() -> list[str]:
    """Names of the benchmark modules, in alphabetical order."""
    here = Path(__file__).parent
    return sorted(
        m.name
        for m in pkgutil.iter_modules([str(here)])
        if not m.name.startswith("_") and m.name not in NOT_BENCHMARKS
    )


def arguments(name: str, rows: int, repeat: int) -> list[str]:
    if name == "export_memory":
        return ["--rows", str(rows * 5)]
    if name == "iceberg_record":
        return ["--snapshots", str(max(50, min(2000, rows // 100))), "--repeat", str(repeat)]
    if name == "import_time":
        return ["--runs", str(max(repeat, 3))]
    return ["--rows", str(rows), "--repeat", str(repeat)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", action="append", default=[], help="run only this benchmark")
    parser.add_argument("--skip", action="append", default=[], help="leave this benchmark out")
    args = parser.parse_args(argv)
    names = [n for n in discover() if (not args.only or n in args.only) and n not in args.skip]
    failed = []
    for name in names:
        bench_args = arguments(name, args.rows, args.repeat)
        print(f"== {name} {' '.join(bench_args)}", flush=True)
        try:
            module = importlib.import_module(f"benchmarks.{name}")
            status = module.main(bench_args)
        except Exception:
            traceback.print_exc()
            status = 2
        print(flush=True)
        if status:
            failed.append(name)
    if failed:
        print(f"missed their targets or failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
