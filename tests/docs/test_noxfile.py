"""noxfile.py finds pyenv's Pythons and says at the end which Pythons ran.

Fast: nothing here runs a nox session. noxfile.py is copied into a temporary
folder and imported from there (so its ``.nox/pyenv-bin`` lands there too),
with a stand-in ``nox`` module (nox need not be installed), and with PATH and
PYENV_ROOT pointing at empty folders while it is imported.
"""

from __future__ import annotations

import atexit
import importlib.util
import logging
import os
import shutil
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _stub_nox() -> types.ModuleType:
    nox = types.ModuleType("nox")
    nox.options = types.SimpleNamespace()  # type: ignore[attr-defined]
    nox.session = lambda *args, **kwargs: lambda func: func  # type: ignore[attr-defined]
    nox.Session = object  # type: ignore[attr-defined]
    return nox


def _load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> types.ModuleType:
    """Import a copy of noxfile.py living in ``tmp_path/project``."""
    # Always the stand-in: real nox would warn that the sessions are registered twice.
    monkeypatch.setitem(sys.modules, "nox", _stub_nox())
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    shutil.copy(ROOT / "noxfile.py", project / "noxfile.py")
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("PYENV_ROOT", str(empty))
    monkeypatch.delenv("CI", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    spec = importlib.util.spec_from_file_location("noxfile_under_test", project / "noxfile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    atexit.unregister(module._print_summary)
    logging.getLogger("nox").removeHandler(module.RUNS)
    return module


@pytest.fixture
def noxfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    return _load(tmp_path, monkeypatch)


def _exe(path: Path, body: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(0o755)
    return path


def _pyenv(root: Path, *names: str) -> Path:
    """A fake pyenv root with ``versions/<name>/bin/python<X.Y>`` for each name."""
    for name in names:
        xy = ".".join(name.split(".")[:2]).rstrip("t").split("-")[0]
        _exe(root / "versions" / name / "bin" / f"python{xy}")
    return root


def test_pyenv_python_takes_the_newest_plain_release(noxfile, tmp_path: Path) -> None:
    root = _pyenv(tmp_path / "pyenv", "3.12.1", "3.12.10", "3.12.9", "3.13.0t", "3.12-dev")
    _exe(root / "versions" / "3.13.1" / "bin" / "python3.13").chmod(0o644)  # not executable
    assert noxfile.pyenv_python(root, "3.12") == root / "versions/3.12.10/bin/python3.12"
    assert noxfile.pyenv_python(root, "3.13") is None
    assert noxfile.pyenv_python(root, "3.11") is None


def test_pyenv_root_is_pyenv_root_else_home(noxfile, tmp_path: Path, monkeypatch) -> None:
    root = _pyenv(tmp_path / "custom", "3.12.1")
    assert noxfile.pyenv_root({"PYENV_ROOT": str(root)}) == root
    home = tmp_path / "home"
    _pyenv(home / ".pyenv", "3.13.0")
    monkeypatch.setenv("HOME", str(home))
    assert noxfile.pyenv_root({}) == home / ".pyenv"
    assert noxfile.pyenv_root({"PYENV_ROOT": str(tmp_path / "nowhere")}) is None


def test_locate_pythons(noxfile, tmp_path: Path) -> None:
    root = _pyenv(tmp_path / "pyenv", "3.12.1", "3.13.0")
    real = _exe(tmp_path / "usr" / "bin" / "python3.11").parent
    shims = tmp_path / "pyenv" / "shims"
    for xy in ("3.11", "3.12", "3.13", "3.14"):
        _exe(shims / f"python{xy}", "#!/bin/sh\nexit 127\n")
    later = _exe(tmp_path / "opt" / "bin" / "python3.14").parent
    path = os.pathsep.join(map(str, [shims, real, later]))

    links, missing = noxfile.locate_pythons(["3.11", "3.12", "3.13", "3.14", "3.15"], path, root)

    # 3.11: the shim comes first and pyenv has no 3.11, so the real one behind it.
    assert links == {
        "3.11": real / "python3.11",
        "3.12": root / "versions/3.12.1/bin/python3.12",
        "3.13": root / "versions/3.13.0/bin/python3.13",
        "3.14": later / "python3.14",
    }
    assert missing == ["3.15"]
    # A real interpreter first on PATH is left alone.
    assert noxfile.locate_pythons(["3.11"], str(real), root) == ({}, [])
    assert noxfile.locate_pythons(["3.12"], str(shims), None) == ({}, ["3.12"])


def test_expose_links_versioned_names_first_on_path(noxfile, tmp_path: Path) -> None:
    bindir = tmp_path / "nox" / "pyenv-bin"
    exe12 = _exe(tmp_path / "a" / "python3.12")
    exe13 = _exe(tmp_path / "b" / "python3.13")
    path = noxfile.expose({"3.12": exe12, "3.13": exe13}, bindir, "/usr/bin")
    assert path == os.pathsep.join([str(bindir), "/usr/bin"])
    assert sorted(p.name for p in bindir.iterdir()) == ["python3.12", "python3.13"]
    assert (bindir / "python3.12").resolve() == exe12.resolve()

    # A later run without 3.13 drops its link; with nothing to link PATH is unchanged.
    noxfile.expose({"3.12": exe12}, bindir, "/usr/bin")
    assert [p.name for p in bindir.iterdir()] == ["python3.12"]
    assert noxfile.expose({}, bindir, "/usr/bin") == "/usr/bin"
    assert list(bindir.iterdir()) == []
    assert noxfile.without(os.pathsep.join([str(bindir), "/usr/bin"]), bindir) == "/usr/bin"


def test_import_links_pyenv_pythons_onto_path(tmp_path: Path, monkeypatch) -> None:
    root = _pyenv(tmp_path / "pyenv", "3.11.7", "3.12.1", "3.13.0")
    module = _load(tmp_path, monkeypatch, PYENV_ROOT=str(root))
    bindir = tmp_path / "project" / ".nox" / "pyenv-bin"
    assert os.environ["PATH"].split(os.pathsep)[0] == str(bindir)
    assert sorted(p.name for p in bindir.iterdir()) == ["python3.11", "python3.12", "python3.13"]
    assert module.MISSING == []


def _feed(record: object, *messages: str) -> None:
    for message in messages:
        record.emit(logging.LogRecord("nox", logging.WARNING, "", 0, message, None, None))


def _run(noxfile: types.ModuleType, *, missing_status: str) -> object:
    """nox's own log lines for tests-3.11/3.12 run, tests-3.13 without an interpreter."""
    runs = noxfile.RunRecord()
    for version in ("3.11", "3.12"):
        _feed(runs, f"Running session tests-{version}")
        runs.entered("tests", version)
        _feed(runs, f"Session tests-{version} was successful in 9 seconds.")
    _feed(
        runs,
        "Running session tests-3.13",
        f"Session tests-3.13 {missing_status}: Python interpreter 3.13 not found (took 7 seconds).",
        "Running session lint",
        "Session lint failed.",
    )
    return runs


def test_summary_locally_says_coverage_is_partial(noxfile) -> None:
    runs = _run(noxfile, missing_status="skipped")
    assert runs.summary(in_ci=False) == [
        (
            "partial",
            "tests: ran on 3.11, 3.12; skipped 3.13 (interpreter not found); coverage is partial",
        )
    ]


def test_summary_in_ci_says_the_run_fails(noxfile) -> None:
    runs = _run(noxfile, missing_status="failed")
    assert runs.summary(in_ci=True) == [
        (
            "failing",
            "tests: ran on 3.11, 3.12; did not run on 3.13 (interpreter not found);"
            " CI needs every Python, so this run fails",
        )
    ]


def test_summary_of_a_complete_and_a_failed_run(noxfile) -> None:
    runs = noxfile.RunRecord()
    _feed(runs, "Running session tests-3.13")
    runs.entered("tests", "3.13")
    _feed(runs, "Session tests-3.13 was successful.", "Running session install-3.12")
    runs.entered("install", "3.12")
    _feed(runs, "Session install-3.12 failed.")
    assert runs.summary(in_ci=False) == [
        ("complete", "tests: ran on 3.13"),
        ("failed", "install: ran on 3.12 (failed on 3.12)"),
    ]
    assert noxfile.RunRecord().summary(in_ci=True) == []


def test_ci_turns_a_missing_interpreter_into_an_error(tmp_path: Path, monkeypatch) -> None:
    assert _load(tmp_path, monkeypatch).nox.options.error_on_missing_interpreters is False
    assert _load(tmp_path, monkeypatch, CI="true").nox.options.error_on_missing_interpreters
    assert _load(tmp_path, monkeypatch, CI="0").IN_CI is False
