"""Sessions: tests, install, lint, typecheck, docs, bench. ``.ci/run`` is what CI runs.

``tests`` and ``install`` run on every supported Python (3.11, 3.12, 3.13):
``nox -s tests`` runs the suite on all three, ``nox -s tests-3.13`` on one.

Finding the interpreters: a ``python3.X`` on PATH is used as it is. One that
is missing from PATH, or only there as a version manager's shim (pyenv's
shims answer "command not found" for versions not selected), is taken from
pyenv's installs, ``$PYENV_ROOT/versions/3.X.*/bin/python3.X`` (``~/.pyenv``
when PYENV_ROOT is unset; the newest patch release wins): this file links
those into ``.nox/pyenv-bin`` and puts that folder first on PATH before nox
looks. Nothing is downloaded: a Python found nowhere is missing at once
(``nox --download-python auto`` lets nox fetch it with uv instead).

At the end of a run, one line per parametrised session (``tests``,
``install``) says which Pythons ran and which did not, e.g. ``tests: ran on
3.11, 3.12; skipped 3.13 (interpreter not found); coverage is partial``.
Locally a missing interpreter is skipped, not an error: the run can pass, and
that line says coverage was partial. With ``$CI`` set (and not ``0`` or
``false``) a missing interpreter fails its session, so nox exits non-zero and
the line ends "CI needs every Python, so this run fails"
(``--no-error-on-missing-interpreters`` on the command line overrides this).
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

import nox

PYTHON = "3.11"
PYTHONS = ["3.11", "3.12", "3.13"]
HERE = Path(__file__).parent
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["tests", "install", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True
# Locally a missing interpreter is skipped (and reported as partial coverage at
# the end); in CI it fails the run. The command line still wins over this.
nox.options.error_on_missing_interpreters = IN_CI
if hasattr(nox.options, "download_python"):
    # Without this nox asks uv to download a missing Python: without internet
    # that is a screenful of DNS errors before the skip.
    nox.options.download_python = "never"


# --- Finding interpreters ------------------------------------------------------


def pyenv_root(environ: Mapping[str, str] = os.environ) -> Path | None:
    """Where pyenv keeps its Pythons: ``$PYENV_ROOT``, else ``~/.pyenv`` (as ``pyenv root``)."""
    root = Path(environ["PYENV_ROOT"]) if environ.get("PYENV_ROOT") else Path.home() / ".pyenv"
    if (root / "versions").is_dir():
        return root
    # A pyenv installed elsewhere answers for itself.
    exe = shutil.which("pyenv", path=environ.get("PATH"))
    if exe is None:
        return None
    import subprocess

    try:
        done = subprocess.run([exe, "root"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    asked = Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None
    return asked if asked is not None and (asked / "versions").is_dir() else None


def pyenv_python(root: Path, version: str) -> Path | None:
    """The newest ``root/versions/<version>.N/bin/python<version>``, or None.

    Only plain releases count: not ``3.13.0t`` (free-threaded), ``3.12-dev`` or
    a pyenv-virtualenv environment.
    """
    best: tuple[int, Path] | None = None
    pattern = re.compile(rf"{re.escape(version)}\.(\d+)")
    for entry in (root / "versions").glob(f"{version}.*"):
        match = pattern.fullmatch(entry.name)
        exe = entry / "bin" / f"python{version}"
        if match and exe.is_file() and os.access(exe, os.X_OK):
            patch = int(match.group(1))
            if best is None or patch > best[0]:
                best = (patch, exe)
    return best[1] if best else None


def _is_shim(exe: str) -> bool:
    # pyenv, pyenv-virtualenv and asdf all put their shims in a "shims" folder.
    return Path(exe).parent.name == "shims"


def locate_pythons(
    versions: Iterable[str], path: str, root: Path | None
) -> tuple[dict[str, Path], list[str]]:
    """Which interpreters nox would not find on ``path`` by itself, and where they are.

    Returns ``(links, missing)``: ``links`` maps a version to the executable to
    expose as ``python<version>``; ``missing`` lists the versions found nowhere.
    A version whose first ``python<version>`` on ``path`` is a real executable
    is in neither.
    """
    links: dict[str, Path] = {}
    missing: list[str] = []
    for version in versions:
        name = f"python{version}"
        first = shutil.which(name, path=path)
        if first is not None and not _is_shim(first):
            continue
        found = pyenv_python(root, version) if root is not None else None
        if found is None:
            # Behind the shim there may still be a real one further along PATH.
            for folder in path.split(os.pathsep):
                exe = shutil.which(name, path=folder) if folder else None
                if exe is not None and not _is_shim(exe):
                    found = Path(exe)
                    break
        if found is not None:
            links[version] = found
        else:
            missing.append(version)
    return links, missing


def expose(links: Mapping[str, Path], bindir: Path, path: str) -> str:
    """Make ``bindir`` hold exactly ``links`` as ``python<version>``; return ``path`` with it first.

    Only the versioned names are linked, so nothing else on PATH is shadowed.
    A link left from an earlier run for a version no longer found is removed.
    The folder persists: the virtualenvs nox makes record it as their home.
    """
    if bindir.is_dir():
        for old in bindir.glob("python3.*"):
            version = old.name.removeprefix("python")
            if old.is_symlink() and version not in links:
                old.unlink()
    if not links:
        return path
    bindir.mkdir(parents=True, exist_ok=True)
    for version, exe in links.items():
        link = bindir / f"python{version}"
        if link.is_symlink() and os.readlink(link) == str(exe):
            continue
        link.unlink(missing_ok=True)
        link.symlink_to(exe)
    return os.pathsep.join([str(bindir), path])


def without(path: str, folder: Path) -> str:
    """``path`` minus ``folder`` (left there by an outer nox run, say)."""
    return os.pathsep.join(f for f in path.split(os.pathsep) if f and Path(f) != folder)


PYENV_BIN = HERE / ".nox" / "pyenv-bin"
_PATH = without(os.environ.get("PATH", os.defpath), PYENV_BIN)
LINKS, MISSING = locate_pythons(PYTHONS, _PATH, pyenv_root())
os.environ["PATH"] = expose(LINKS, PYENV_BIN, _PATH)


# --- The end-of-run summary ----------------------------------------------------

# nox has no end-of-run hook. Which sessions were selected comes from nox's own
# log lines ("Running session tests-3.13", "Session tests-3.13 skipped: ...");
# which of them ran comes from the session bodies themselves (a session whose
# interpreter is missing never enters its function).
SUMMARISED = ("tests", "install")
_SESSION_LINE = re.compile(
    r"(?:Running session (?P<started>[\w-]+)-(?P<py1>\d+\.\d+)"
    r"|Session (?P<ended>[\w-]+)-(?P<py2>\d+\.\d+) (?P<status>skipped|failed|aborted)"
    r"(?:: (?P<reason>.*?))?(?: \(took [^)]*\))?\.)$"
)


class RunRecord(logging.Handler):
    """Collects, per parametrised session, the Pythons selected, run, and how each ended."""

    def __init__(self) -> None:
        super().__init__(level=logging.NOTSET)
        self.selected: dict[str, dict[str, None]] = {}  # name -> versions, in run order
        self.ran: dict[str, set[str]] = {}
        # (name, version) -> (status, reason) for sessions that did not succeed.
        self.ends: dict[tuple[str, str], tuple[str, str | None]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        match = _SESSION_LINE.match(record.getMessage())
        if match is None:
            return
        name = match.group("started") or match.group("ended")
        if name not in SUMMARISED:
            return
        version = match.group("py1") or match.group("py2")
        self.selected.setdefault(name, {})[version] = None
        if match.group("status"):
            self.ends[name, version] = (match.group("status"), match.group("reason"))

    def entered(self, name: str, version: str) -> None:
        """Called by a session body: this Python really ran."""
        self.selected.setdefault(name, {})[version] = None
        self.ran.setdefault(name, set()).add(version)

    def _why(self, name: str, version: str, missing: set[str]) -> str:
        _, reason = self.ends.get((name, version), (None, None))
        if reason and "interpreter" in reason and "not found" in reason:
            return "interpreter not found"
        if reason:
            return reason
        return "interpreter not found" if version in missing else "did not start"

    def summary(self, *, in_ci: bool, missing: Iterable[str] = ()) -> list[tuple[str, str]]:
        """One ``(level, line)`` per summarised session that was selected.

        ``level`` is ``"complete"`` (every selected Python ran and passed),
        ``"failed"`` (every one ran, some failed), ``"partial"`` (some were
        skipped; the run can still pass) or ``"failing"`` (some never ran and
        nox counts that as a failure, as it does in CI).
        """
        missing = set(missing)
        lines = []
        for name in SUMMARISED:
            versions = list(self.selected.get(name, {}))
            if not versions:
                continue
            ran = [v for v in versions if v in self.ran.get(name, set())]
            head = f"ran on {', '.join(ran)}" if ran else "ran on no Python"
            failed = [v for v in ran if self.ends.get((name, v), ("",))[0] == "failed"]
            if failed:
                head += f" (failed on {', '.join(failed)})"
            parts = [head]
            not_run = [v for v in versions if v not in ran]
            lost = [v for v in not_run if self.ends.get((name, v), ("",))[0] != "skipped"]
            skipped = [v for v in not_run if v not in lost]
            parts += [f"skipped {v} ({self._why(name, v, missing)})" for v in skipped]
            parts += [f"did not run on {v} ({self._why(name, v, missing)})" for v in lost]
            if not not_run:
                level = "failed" if failed else "complete"
            elif lost:
                level = "failing"
                parts.append(
                    "CI needs every Python, so this run fails" if in_ci else "this run fails"
                )
            else:
                level = "partial"
                parts.append("coverage is partial")
            lines.append((level, f"{name}: " + "; ".join(parts)))
        return lines


RUNS = RunRecord()
logging.getLogger("nox").addHandler(RUNS)


@atexit.register
def _print_summary() -> None:
    log = logging.getLogger("nox")
    for level, line in RUNS.summary(in_ci=IN_CI, missing=MISSING):
        if level == "complete":
            log.log(logging.INFO + 5, line)  # nox's "success" level (green)
        elif level == "partial":
            log.warning(line)
        else:
            log.error(line)


# --- Sessions ------------------------------------------------------------------


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The whole test suite, against the real peers the fixtures start."""
    RUNS.entered("tests", str(session.python))
    session.install("-e", ".[test,iceberg,docs]", "./tests/thirdparty", "./examples/acme-sqlite")
    profile = "ci" if IN_CI else "dev"
    session.run("pytest", f"--hypothesis-profile={profile}", *session.posargs)


@nox.session(python=PYTHONS, reuse_venv=False)
def install(session: nox.Session) -> None:
    """The wheel alone, as a new user gets it: no extras, no test packages.

    Builds the wheel, installs it into a fresh virtualenv, runs the README's
    main command and every command the demo prints (checking exit statuses),
    and imports every module not documented as needing an extra.
    """
    RUNS.entered("install", str(session.python))
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
    """ruff, the architecture, the public surface and the manual's build.

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
    session.install("-e", ".[testing,docs]")
    session.run(
        "python", "tools/api_surface.py", "--check", env={"PYTHONPATH": session.invoked_from}
    )
    # The manual, reference pages included, renders without a warning.
    site = Path(session.create_tmp()) / "site"
    session.run("mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site))


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
