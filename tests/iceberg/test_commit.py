"""The batch transaction: pyiceberg's, with its metadata view made once per change."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypaware.iceberg.commit import _BatchTransaction

from .helpers import DATASET, build_sink, sink_config

pytestmark = pytest.mark.iceberg


async def test_the_metadata_view_is_made_once_and_follows_every_change(tmp_path: Path) -> None:
    sink = build_sink(sink_config(tmp_path))
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    checks: list[str] = []
    tx = _BatchTransaction(table, lambda: checks.append("rechecked"))

    first = tx.table_metadata
    assert tx.table_metadata is first  # not deep-copied again on every read
    assert first is not table.metadata  # still a copy: the table's own is never handed out

    tx.set_properties({"owner": "ops"})
    staged = tx.table_metadata
    assert staged is not first and staged.properties["owner"] == "ops"
    assert "owner" not in first.properties

    table.refresh()  # the same metadata file: the same parsed base, so the view stands
    assert tx.table_metadata is staged

    other = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    other.transaction().set_properties({"team": "data"}).commit_transaction()
    table.refresh()  # a new base: the view is made again from it
    assert tx.table_metadata is not staged
    assert tx.table_metadata.properties["owner"] == "ops"
    assert tx.table_metadata.properties["team"] == "data"

    tx.commit_transaction()
    assert table.metadata.properties["owner"] == "ops"
    assert checks == []  # no conflict, so no rebase to check before
    await sink.close()
