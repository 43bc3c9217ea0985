"""mypy --strict over the example plugin package and a `reveal_type` file: no `Any` leaks.

Every ``reveal_type(x)`` of `reveal_public_api.py` must reveal exactly the
type in the ``# reveals:`` comment above it, and no revealed type may
contain ``Any``.
"""

from __future__ import annotations

import re
from pathlib import Path

from mypy import api as mypy_api

ROOT = Path(__file__).resolve().parents[2]
REVEAL = Path(__file__).with_name("reveal_public_api.py")
EXAMPLE = ROOT / "examples" / "acme-sqlite" / "src"
NOTE = re.compile(r'^(?P<file>[^:]+):(?P<line>\d+): note: Revealed type is "(?P<type>.*)"$')


def expected() -> dict[int, str]:
    """``{line of the reveal_type call: the type its comment says}``."""
    out: dict[int, str] = {}
    pending: list[str] = []
    for n, line in enumerate(REVEAL.read_text().splitlines(), start=1):
        text = line.strip()
        if text.startswith("# reveals: "):
            pending = [text.removeprefix("# reveals: ")]
        elif pending and text.startswith("#   "):
            pending.append(text.removeprefix("#").strip())
        elif pending and text.startswith("reveal_type("):
            out[n] = " ".join(pending)
            pending = []
    return out


def test_public_api_types_under_mypy_strict(tmp_path: Path) -> None:
    stdout, stderr, status = mypy_api.run(
        [
            "--strict",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            "--no-error-summary",
            str(REVEAL),
            str(EXAMPLE),
        ]
    )
    lines = stdout.splitlines()
    errors = [line for line in lines if ": error:" in line]
    assert errors == [], "\n".join(errors) + stderr
    revealed = {int(m["line"]): m["type"] for line in lines if (m := NOTE.match(line)) is not None}
    assert revealed == expected()
    leaking = {n: t for n, t in revealed.items() if re.search(r"\bAny\b", t)}
    assert leaking == {}
    assert status == 0, stdout + stderr
