"""Cost of ``import hypaware`` for a host application, beside the imports it avoids.

Each figure is the best of N fresh interpreters, as measured by the
interpreter itself (``-X importtime``, cumulative time of the top-level
module), so interpreter start-up and machine noise stay out of it.
Target: hypaware under 100 ms.

    python -m benchmarks.import_time [--runs N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys

TARGET_MS = 100.0
MODULES = ("hypaware", "pyarrow", "obstore", "httpx", "pyiceberg.catalog")


def import_ms(module: str) -> float:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        check=True,
        capture_output=True,
        text=True,
    )
    top = module.split(".")[0]
    total = 0
    for line in proc.stderr.splitlines():
        # "import time: self [us] | cumulative | imported package"
        parts = line.split("|")
        if len(parts) == 3 and parts[2].strip() in (top, module):
            total = max(total, int(parts[1]))
    return total / 1000


def best_of(module: str, runs: int) -> float:
    return min(import_ms(module) for _ in range(runs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args(argv)
    results = {m: best_of(m, args.runs) for m in MODULES}
    ours = results["hypaware"]
    for module, ms in results.items():
        ratio = "" if module == "hypaware" else f"  (hypaware / this = {ours / ms:.2f})"
        print(f"import {module:<18} {ms:7.1f} ms{ratio}")
    verdict = "ok" if ours < TARGET_MS else "OVER TARGET"
    print(f"hypaware import: {ours:.1f} ms, target < {TARGET_MS:.0f} ms: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
