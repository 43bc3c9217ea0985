"""``tools/api_surface.py``: docs/api-surface.txt matches the code, and a change needs CHANGELOG.

The tool runs as a subprocess, as the lint session runs it; the tests that
change things work on copies in ``tmp_path`` (``--snapshot``, ``--changelog``),
never on the repository's files.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "api_surface.py"
SNAPSHOT = ROOT / "docs" / "api-surface.txt"
CHANGELOG = ROOT / "CHANGELOG.md"


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def copies(tmp_path: Path) -> tuple[Path, Path]:
    snapshot = tmp_path / "api-surface.txt"
    changelog = tmp_path / "CHANGELOG.md"
    shutil.copyfile(SNAPSHOT, snapshot)
    shutil.copyfile(CHANGELOG, changelog)
    return snapshot, changelog


def change_build_signature(snapshot: Path) -> None:
    """Edit the ``def build(`` line, as if its signature had been changed on purpose."""
    text = snapshot.read_text(encoding="utf-8")
    changed, n = re.subn(
        r"^def build\(.*$", "def build(plan: SinkPlan) -> ManagedSink", text, flags=re.M
    )
    assert n == 1, "docs/api-surface.txt has no 'def build(' line"
    assert changed != text
    snapshot.write_text(changed, encoding="utf-8")


def test_the_committed_snapshot_matches_the_code() -> None:
    result = run("--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_snapshot_is_stable_across_runs() -> None:
    first, second = run(), run()
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert first.stdout == second.stdout
    assert "def build(" in first.stdout
    assert " at 0x" not in first.stdout


def test_check_fails_when_the_surface_changed(tmp_path: Path) -> None:
    snapshot, changelog = copies(tmp_path)
    change_build_signature(snapshot)
    result = run("--check", "--snapshot", snapshot, "--changelog", changelog)
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert "public surface changed" in output
    assert "-def build(plan: SinkPlan) -> ManagedSink" in output  # the unified diff


def test_write_needs_a_changelog_entry_for_a_changed_surface(tmp_path: Path) -> None:
    snapshot, changelog = copies(tmp_path)
    # Record the copied CHANGELOG's hash first (the surface is unchanged, so
    # --write accepts), whatever the committed snapshot recorded.
    assert run("--write", "--snapshot", snapshot, "--changelog", changelog).returncode == 0
    change_build_signature(snapshot)
    before = snapshot.read_text(encoding="utf-8")

    refused = run("--write", "--snapshot", snapshot, "--changelog", changelog)
    assert refused.returncode == 1
    assert "CHANGELOG.md" in refused.stderr
    assert "top section did not" in refused.stderr
    assert snapshot.read_text(encoding="utf-8") == before

    text = changelog.read_text(encoding="utf-8")
    heading = next(line for line in text.splitlines(keepends=True) if line.startswith("## "))
    changelog.write_text(
        text.replace(heading, heading + "\n- `build` takes a changed signature.\n", 1),
        encoding="utf-8",
    )
    written = run("--write", "--snapshot", snapshot, "--changelog", changelog)
    assert written.returncode == 0, written.stdout + written.stderr
    checked = run("--check", "--snapshot", snapshot, "--changelog", changelog)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert (
        snapshot.read_text(encoding="utf-8").splitlines()[1:]
        == (SNAPSHOT.read_text(encoding="utf-8").splitlines()[1:])
    )


def test_an_edit_below_the_top_section_is_not_an_entry(tmp_path: Path) -> None:
    snapshot, changelog = copies(tmp_path)
    assert run("--write", "--snapshot", snapshot, "--changelog", changelog).returncode == 0
    change_build_signature(snapshot)
    text = changelog.read_text(encoding="utf-8")
    headings = [m.start() for m in re.finditer(r"^## ", text, flags=re.M)]
    assert len(headings) >= 2, "CHANGELOG.md needs an older section for this test"
    changelog.write_text(
        text[: headings[1]] + text[headings[1] :].replace("\n", "\n\n", 1), encoding="utf-8"
    )
    refused = run("--write", "--snapshot", snapshot, "--changelog", changelog)
    assert refused.returncode == 1, refused.stdout + refused.stderr
