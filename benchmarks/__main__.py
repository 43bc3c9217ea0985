"""Run every benchmark at one size: ``python -m benchmarks [--rows N] [--repeat K]``.

The export benchmarks take `--rows` (the memory one exports 5x that many in
one partition, as its own target asks); the import-time one takes no size.
Exits non-zero if any benchmark misses its target.
"""

from __future__ import annotations

import argparse
import importlib

EXPORTS = ("export_local", "export_s3")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip", action="append", default=[], help="a benchmark to leave out")
    args = parser.parse_args(argv)
    plan: list[tuple[str, list[str]]] = [
        (name, ["--rows", str(args.rows), "--repeat", str(args.repeat)]) for name in EXPORTS
    ]
    plan.append(("export_memory", ["--rows", str(args.rows * 5)]))
    plan.append(("import_time", ["--runs", str(max(args.repeat, 3))]))
    failed = []
    for name, bench_args in plan:
        if name in args.skip:
            continue
        print(f"== {name} {' '.join(bench_args)}", flush=True)
        module = importlib.import_module(f"benchmarks.{name}")
        status = module.main(bench_args)
        print(flush=True)
        if status:
            failed.append(name)
    if failed:
        print(f"missed their targets: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
