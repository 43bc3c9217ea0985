"""Sessions: tests, install, lint, typecheck, docs, bench. ``.ci/run`` is what CI runs.

``tests`` and ``install`` run on every supported Python (3.11, 3.12, 3.13):
``nox -s tests`` runs the suite on all three, ``nox -s tests-3.13`` on one.
An interpreter this machine does not have is skipped with a message, not an
error. CI runs the suite on all three (see ``.ci/run``).
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["tests", "install", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True
# nox turns a missing interpreter into an error when $CI is set; skipping keeps
# a machine with only 3.11 green while still running every version it has.
nox.options.error_on_missing_interpreters = False

PYTHON = "3.11"
PYTHONS = ["3.11", "3.12", "3.13"]
HERE = Path(__file__).parent


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The whole test suite, against the real peers the fixtures start."""
    session.install("-e", ".[test,iceberg,docs]", "./tests/thirdparty", "./examples/acme-sqlite")
    profile = "ci" if os.environ.get("CI") else "dev"
    session.run("pytest", f"--hypothesis-profile={profile}", *session.posargs)


@nox.session(python=PYTHONS, reuse_venv=False)
def install(session: nox.Session) -> None:
    """The wheel alone, as a new user gets it: no extras, no test packages.

    Builds the wheel, installs it into a fresh virtualenv, runs the README's
    main command and every command the demo prints (checking exit statuses),
    and imports every module not documented as needing an extra.
    """
    dist = Path(session.create_tmp()) / "dist"
    for old in dist.glob("*.whl"):
        old.unlink()
    session.run(
        "uv", "build", "--wheel", "--quiet", "--out-dir", str(dist), str(HERE), external=True
    )
    (wheel,) = dist.glob("hypaware-*.whl")
    session.install(str(wheel))
    work = Path(session.create_tmp()) / "user"
    work.mkdir(exist_ok=True)
    session.chdir(work)
    session.run("python", "-I", str(HERE / ".ci" / "check_install.py"))


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff, the architecture and the public surface.

    ``lint-imports`` checks pyproject's layer contract; ``tools/api_surface.py
    --check`` fails when the public surface differs from docs/api-surface.txt
    (see CHANGELOG.md).
    """
    session.install("ruff>=0.8", "import-linter>=2.1")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", "hypaware", "tests", "tools")
    # grimp reads the source; the package need not be installed, only on the path.
    session.run("lint-imports", env={"PYTHONPATH": session.invoked_from})
    # The surface check imports hypaware; the conformance module needs pytest
    # (the ``testing`` extra).
    session.install("-e", ".[testing]")
    session.run(
        "python", "tools/api_surface.py", "--check", env={"PYTHONPATH": session.invoked_from}
    )


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    session.install(
        "-e",
        ".[test,iceberg]",
        "./tests/thirdparty",
        "./examples/acme-sqlite",
        "mypy>=1.13",
        "types-croniter",
    )
    session.run("mypy")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the user manual and the API reference; strict, so any warning fails it."""
    session.install("-e", ".[docs]")
    session.run("mkdocs", "build", "--strict", "--site-dir", f"{session.create_tmp()}/site")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Side-by-side benchmarks against raw pyarrow and peers; prints ratios."""
    session.install("-e", ".[test,iceberg]")
    session.run("python", "-m", "benchmarks", *session.posargs)
