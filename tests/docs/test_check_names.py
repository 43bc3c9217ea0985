"""The manual names every conformance check, so an author can see what each proves."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypaware.testing import conformance

MANUAL = Path(__file__).resolve().parents[2] / "docs" / "writing-plugins.md"

NAMES = (
    conformance.SINK_CHECK_NAMES
    + conformance.QUERYABLE_CHECK_NAMES
    + conformance.ENCODER_CHECK_NAMES
    + conformance.STORE_CHECK_NAMES
)


@pytest.mark.parametrize("name", NAMES)
def test_every_check_has_a_row_in_the_manual(name: str) -> None:
    # Each check is a table row "| `test_<name>` | the promise |".
    assert f"| `test_{name}` |" in MANUAL.read_text(encoding="utf-8"), name
