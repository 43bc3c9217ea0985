"""Sessions: tests, lint, typecheck, docs, bench. ``nox -s tests`` is what CI runs."""

from __future__ import annotations

import os

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = "3.11"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole test suite, against the real peers the fixtures start."""
    session.install("-e", ".[test,iceberg,docs]", "./tests/thirdparty", "./examples/acme-sqlite")
    profile = "ci" if os.environ.get("CI") else "dev"
    session.run("pytest", f"--hypothesis-profile={profile}", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff, and the architecture: ``lint-imports`` checks pyproject's layer contract."""
    session.install("ruff>=0.8", "import-linter>=2.1")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", "hypaware", "tests")
    # grimp reads the source; the package need not be installed, only on the path.
    session.run("lint-imports", env={"PYTHONPATH": session.invoked_from})


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
    session.install("-e", ".[test,iceberg,bench]")
    session.run("python", "-m", "benchmarks", *session.posargs)
