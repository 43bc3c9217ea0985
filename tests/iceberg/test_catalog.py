"""Catalog helpers: the retry loop (with a fake clock), namespace races, table names."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pyiceberg.exceptions import CommitFailedException

from hypaware.iceberg.catalog import ensure_namespace, is_conflict, retrying, table_identifier

pytestmark = pytest.mark.iceberg


def test_retrying_backs_off_doubling_to_a_cap_then_gives_up() -> None:
    waits: list[float] = []
    calls = 0

    def always_conflicts() -> None:
        nonlocal calls
        calls += 1
        raise CommitFailedException("someone else won")

    with pytest.raises(CommitFailedException):
        retrying(
            always_conflicts, retry_on=is_conflict, attempts=8, backoff=1.0, sleep=waits.append
        )

    assert calls == 9
    assert len(waits) == 8
    bases = [1.0, 2.0, 4.0, 5.0, 5.0, 5.0, 5.0, 5.0]
    for wait, base in zip(waits, bases, strict=True):
        assert base <= wait <= base * 1.5


def test_retrying_returns_once_it_works_and_passes_other_errors_through() -> None:
    waits: list[float] = []
    outcomes: list[Any] = [
        Exception("(sqlite3.OperationalError) database is locked"),
        CommitFailedException("x"),
        "done",
    ]

    def step() -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return str(outcome)

    assert (
        retrying(step, retry_on=is_conflict, attempts=5, backoff=0.1, sleep=waits.append) == "done"
    )
    assert len(waits) == 2

    def broken() -> None:
        raise ValueError("not a conflict")

    with pytest.raises(ValueError, match="not a conflict"):
        retrying(broken, retry_on=is_conflict, attempts=5, backoff=0.1, sleep=waits.append)
    assert len(waits) == 2


def test_every_wait_is_told_before_it_is_taken_with_its_cause() -> None:
    events: list[tuple[str, Any]] = []
    outcomes: list[Any] = [
        CommitFailedException("x"),
        Exception("(sqlite3.OperationalError) database is locked"),
        "done",
    ]

    def step() -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return str(outcome)

    result = retrying(
        step,
        retry_on=is_conflict,
        attempts=5,
        backoff=0.1,
        sleep=lambda s: events.append(("slept", s)),
        on_wait=lambda cause, s: events.append((cause, s)),
    )
    assert result == "done"
    assert [e[0] for e in events] == ["commit-conflict", "slept", "catalog-locked", "slept"]
    assert events[0][1] == events[1][1] and events[2][1] == events[3][1]
    assert 0.1 <= events[0][1] <= 0.15 and 0.2 <= events[2][1] <= 0.3


class _RacingCatalog:
    """Loses the race to create every namespace level: another writer made it first."""

    def __init__(self, exists: bool) -> None:
        self.exists = exists
        self.asked: list[tuple[str, ...]] = []

    def create_namespace_if_not_exists(self, namespace: tuple[str, ...]) -> None:
        self.asked.append(namespace)
        raise RuntimeError("UNIQUE constraint failed: iceberg_namespace_properties")

    def namespace_exists(self, namespace: tuple[str, ...]) -> bool:
        return self.exists


def test_a_namespace_created_by_another_writer_meanwhile_is_fine() -> None:
    catalog = _RacingCatalog(exists=True)
    ensure_namespace(catalog, ("analytics", "raw"))  # type: ignore[arg-type]
    assert catalog.asked == [("analytics",), ("analytics", "raw")]

    with pytest.raises(RuntimeError, match="UNIQUE"):
        ensure_namespace(_RacingCatalog(exists=False), ("analytics",))  # type: ignore[arg-type]


def test_table_names_come_from_dataset_names() -> None:
    assert table_identifier("hypaware", "messages") == ("hypaware", "messages")
    assert table_identifier("a.b", "llm-calls.v2") == ("a", "b", "llm_calls_v2")


@pytest.fixture
def sql_catalog(tmp_path: Any) -> Iterator[Callable[[], Any]]:
    """Opens SQL catalogs on one sqlite file, and disposes their engines after the test.

    An engine left to the garbage collector closes its pooled sqlite
    connections there, which Python 3.13 reports as a ResourceWarning in
    whichever test happens to be running.
    """
    from hypaware.iceberg.catalog import _disposing_sql_catalog

    warehouse = tmp_path / "wh"
    warehouse.mkdir(exist_ok=True)
    opened: list[Any] = []

    def open_catalog() -> Any:
        catalog = _disposing_sql_catalog()(
            "c", uri=f"sqlite:///{tmp_path / 'cat.db'}", warehouse=f"file://{warehouse}"
        )
        opened.append(catalog)
        return catalog

    yield open_catalog
    for catalog in opened:
        catalog.engine.dispose()


def test_a_table_loads_without_parsing_a_metadata_file_already_seen(
    sql_catalog: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow as pa
    from pyiceberg.serializers import FromInputFile

    creator = sql_catalog()
    creator.create_namespace("ns")
    creator.create_table("ns.t", schema=pa.schema([("x", pa.int64())]))
    catalog = sql_catalog()
    parsed: list[str] = []
    real = FromInputFile.table_metadata

    def counting(input_file: Any, encoding: str = "utf-8") -> Any:
        parsed.append(input_file.location)
        return real(input_file, encoding)

    monkeypatch.setattr(FromInputFile, "table_metadata", staticmethod(counting))
    catalog.load_table("ns.t")
    catalog.load_table("ns.t")
    assert len(parsed) == 1  # the first load parses; the second finds it parsed

    # A commit's own metadata is known without reading it back.
    table = catalog.load_table("ns.t")
    table.append(pa.table({"x": pa.array([1, 2], pa.int64())}))
    again = catalog.load_table("ns.t")
    assert len(parsed) == 1
    assert again.metadata_location == table.metadata_location
    assert again.current_snapshot() is not None
    assert again.scan().to_arrow().num_rows == 2

    # Another writer's commit moves the catalog's pointer: its file is parsed.
    other = sql_catalog().load_table("ns.t")
    other.append(pa.table({"x": pa.array([3], pa.int64())}))
    fresh = catalog.load_table("ns.t")
    assert fresh.metadata_location == other.metadata_location
    assert fresh.scan().to_arrow().num_rows == 3
    assert parsed[-1] == other.metadata_location
