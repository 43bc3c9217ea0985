"""The manual and the API reference build with mkdocs in strict mode: no warning at all.

A broken link, a missing page, a docstring mkdocstrings cannot parse or a
module that vanished fails this test. The ``docs`` extra installs mkdocs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hypaware._moved import GONE, MOVED

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="install the docs extra: pip install -e '.[docs]'")
    pytest.importorskip("mkdocstrings_handlers.python")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    api = (tmp_path / "site" / "reference" / "testing" / "index.html").read_text()
    assert "SinkContract" in api


def _public_modules() -> list[str]:
    import pkgutil

    import hypaware

    names = []
    for info in pkgutil.walk_packages(hypaware.__path__, "hypaware."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts) or parts[1] == "cli":
            continue
        names.append(info.name)
    return names


def _rooms() -> set[str]:
    # A room's __init__ only says what the room holds (docs/architecture.md maps them).
    return {f"hypaware.{p.name}" for p in (ROOT / "hypaware").iterdir() if p.is_dir()}


def test_every_public_module_is_in_the_api_reference() -> None:
    pages = "\n".join(p.read_text() for p in (ROOT / "docs" / "reference").glob("*.md"))
    documented = {line[4:].strip() for line in pages.splitlines() if line.startswith("::: ")}
    # Plugin modules hold only a manifest; their config classes are documented
    # where they live (plugins.md lists them).
    manifests = {m for m in _public_modules() if m.startswith("hypaware.plugins.")}
    # The 0.1 paths only forward (docs/upgrading.md lists them).
    shims = {f"hypaware.{old}" for old in (*MOVED, *GONE)}
    missing = sorted(set(_public_modules()) - documented - _rooms() - manifests - shims)
    assert missing == [], f"add these modules to a page under docs/reference/: {missing}"
