"""What a new user gets from ``pip install hypaware`` with no extras: run by ``nox -s install``.

Run with the interpreter of a fresh virtualenv holding only the wheel and its
declared dependencies, from an empty working directory. Checks:

1. the README's main command (``hypaware demo``) exits 0;
2. every command the demo prints exits 0, or exits 2 with a message naming
   the extra to install (``hypaware[...]``), never a traceback;
3. a config choosing an option that needs a missing extra is refused by
   ``check-config`` with exit 2 and the extra's name;
4. every module of the package imports, except those in a package whose
   docstring says it needs an extra, and those fail only for want of one of
   that extra's own requirements.

Prints one line per check and exits 1 on the first failure.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
import shlex
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

# Packages (or modules) that need an extra, and the extra; their docstrings must say so.
EXTRA_PACKAGES = {
    "hypaware.iceberg": "iceberg",
    "hypaware.testing": "testing",
    "hypaware.export.otel": "otel",
}
# Modules of those packages that are light on purpose (manifests name their config classes).
LIGHT = {"hypaware.iceberg", "hypaware.iceberg.config", "hypaware.testing"}
TIMEOUT = 300


def fail(message: str) -> None:
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, check=False)


def check_command(argv: list[str]) -> None:
    proc = run(argv)
    shown = shlex.join(["hypaware", *argv[1:]])
    if "Traceback" in proc.stderr or "Traceback" in proc.stdout:
        fail(f"{shown}: printed a traceback:\n{proc.stderr}")
    if proc.returncode == 0:
        print(f"ok   {shown}")
        return
    if proc.returncode == 2 and re.search(r"hypaware\[\w+\]", proc.stderr):
        print(f"ok   {shown}  (exit 2, names its extra)")
        return
    fail(f"{shown}: exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")


def demo_commands(exe: str) -> list[list[str]]:
    proc = run([exe, "demo"])
    if proc.returncode != 0 or "Traceback" in proc.stderr:
        fail(f"hypaware demo: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    print("ok   hypaware demo")
    commands = []
    for line in proc.stdout.splitlines():
        if line.strip().startswith("hypaware "):
            argv = shlex.split(line.strip())
            if argv[1:] != ["demo"]:  # its own banner
                commands.append([exe, *argv[1:]])
    if len(commands) < 3:
        fail(f"hypaware demo printed {len(commands)} commands; expected several:\n{proc.stdout}")
    return commands


def check_missing_extra(exe: str) -> None:
    config = Path("needs-iceberg.json")
    config.write_text(
        json.dumps(
            {
                "sinks": {
                    "lake": {
                        "writer": "@hypaware/format-iceberg",
                        "destination": "@hypaware/local-fs",
                        "config": {"root": "lake", "namespace": "demo"},
                    }
                }
            }
        ),
        encoding="utf-8",
    )
    proc = run([exe, "check-config", "--config", str(config)])
    if proc.returncode != 2 or "hypaware[iceberg]" not in proc.stderr:
        fail(f"check-config, Iceberg without its extra: exit {proc.returncode}\n{proc.stderr}")
    if "Traceback" in proc.stderr:
        fail(f"check-config printed a traceback:\n{proc.stderr}")
    print("ok   hypaware check-config (Iceberg without its extra: exit 2, names hypaware[iceberg])")


def extra_requirements(extra: str) -> set[str]:
    """Import names of the distributions `extra` adds (``pytest-asyncio`` -> ``pytest_asyncio``)."""
    names = set()
    for req in metadata.requires("hypaware") or []:
        if re.search(rf"extra\s*==\s*['\"]{re.escape(extra)}['\"]", req):
            dist = re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0]
            names.add(dist.replace("-", "_").lower())
            # Namespace distributions import by their first part (opentelemetry-api).
            names.add(dist.split("-")[0].lower())
    return names


def check_imports() -> None:
    import hypaware

    root = Path(hypaware.__file__).parent
    for package, extra in EXTRA_PACKAGES.items():
        parts = package.split(".")[1:]
        init = root.joinpath(*parts, "__init__.py")
        if not init.exists():
            init = root.joinpath(*parts[:-1], f"{parts[-1]}.py")
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        if f"hypaware[{extra}]" not in doc:
            fail(f"{package}'s docstring does not say it needs hypaware[{extra}]")
    count = 0
    for info in pkgutil.walk_packages(hypaware.__path__, "hypaware."):
        name = info.name
        if name == "hypaware.__main__":
            continue
        extra = next(
            (e for p, e in EXTRA_PACKAGES.items() if name == p or name.startswith(p + ".")), None
        )
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            missing = (exc.name or "").split(".")[0].lower()
            if extra is None or name in LIGHT:
                fail(f"import {name}: {exc} (an undeclared dependency)")
            if missing not in extra_requirements(extra):
                fail(f"import {name}: {exc}, which hypaware[{extra}] does not provide")
            continue
        count += 1
    print(f"ok   {count} modules import without extras")


def main() -> None:
    exe = shutil.which("hypaware")
    if exe is None or Path(exe).parent != Path(sys.executable).parent:
        fail(f"the hypaware command is not in this virtualenv (found {exe})")
    for argv in demo_commands(exe):
        check_command(argv)
    config = Path("hypaware-demo", "hypaware.json")
    check_command([exe, "check-config", str(config)])
    check_command([exe, "plugins"])
    check_missing_extra(exe)
    check_imports()


if __name__ == "__main__":
    main()
