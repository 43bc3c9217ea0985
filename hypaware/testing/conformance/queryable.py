"""Conformance checks for sinks that claim ``queryable``: reads are exact.

The scan checks call `QueryableSink.scan` directly, after exporting one
batch of five partitions whose ``key`` column holds nulls, and compare what
comes back with what was exported:

- `scan_is_exact`: every committed row once, each value as exported (nulls
  included), each column in the dataset's exact Arrow type;
- `scan_honours_exclude`: for every subset of the five partition ids
  (all 32), none of the excluded partitions' rows and all of the others';
- `scan_honours_projection`: the columns asked for, in order, exact types,
  exact values;
- `scan_honours_filter`: exactly the rows each of several filters passes
  (comparisons, a null test, a negation, an ``or``).

`query_after_lost_ack_reads_rows_once` runs the real export driver and query
planner (`hypaware.testing.conformance.queryable_lost_ack`). First-party
sinks read through their own query sources take only that last check.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.core.contracts import QueryableSink
from hypaware.testing.conformance.data import (
    sample_batch,
    sample_dataset,
    sample_partition,
    sample_table,
)
from hypaware.testing.conformance.promises import CheckSkipped, ContractViolation, Promise
from hypaware.testing.conformance.queryable_lost_ack import (
    check_query_after_lost_ack_reads_rows_once,
)
from hypaware.testing.conformance.scan_rules import (
    expect_ids,
    expect_types,
    expect_values,
    ids_once,
)
from hypaware.testing.conformance.sink_harness import SinkHarness, _build, _closing, _export

if TYPE_CHECKING:
    import pyarrow as pa

    from hypaware.core.filter import Filter
    from hypaware.core.types import DatasetInfo

__all__ = ["QUERYABLE_CHECKS"]

_SIZES = (12, 7, 5, 9, 4)


@attrs.frozen
class _Exported:
    """A sink holding one committed batch, and what that batch held."""

    sink: QueryableSink
    dataset: DatasetInfo
    rows: dict[str, dict[str, Any]]  # row id -> row, as exported
    parts: dict[str, frozenset[str]]  # partition id -> its row ids

    def scan(self, doing: str, promise: Promise, **kw: Any) -> pa.Table:
        try:
            return self.sink.scan(self.dataset, **kw).read_all()
        except Exception as exc:
            raise ContractViolation(promise, f"{doing} raised {type(exc).__name__}: {exc}") from exc


@contextlib.asynccontextmanager
async def _exported(h: SinkHarness, name: str) -> AsyncIterator[_Exported]:
    dataset = sample_dataset(name)
    parts = [
        sample_partition(dataset, f"p{n}", rows, seq=n, nulls=True)
        for n, rows in enumerate(_SIZES, start=1)
    ]
    batch = sample_batch(dataset, parts, batch_id="b1")
    async with _closing(h, await _build(h)) as sink:
        if not callable(getattr(sink, "scan", None)):
            raise CheckSkipped(
                f"{type(sink).__name__} has no scan(); hypaware reads it through its own "
                "query source (checked by query_after_lost_ack_reads_rows_once)"
            )
        assert isinstance(sink, QueryableSink)
        await _export(h, sink, batch)
        rows: dict[str, dict[str, Any]] = {}
        ids: dict[str, frozenset[str]] = {}
        for part in parts:
            table = sample_table(dataset, part.id, part.row_count, seq=part.seq, nulls=True)
            held = {str(r["row_id"]): r for r in table.to_pylist()}
            rows.update(held)
            ids[part.id] = frozenset(held)
        yield _Exported(sink, dataset, rows, ids)


async def check_scan_is_exact(h: SinkHarness) -> None:
    """`scan()`: every committed row once, values as exported, the dataset's exact types."""
    async with _exported(h, "conformance_scan") as ex:
        doing = "scan() after exporting batch 'b1' (5 partitions)"
        table = ex.scan(doing, Promise.SCAN_EXACT)
        expect_ids(ids_once(table, doing, Promise.SCAN_EXACT), ex.rows, doing, Promise.SCAN_EXACT)
        if table.schema.names != ex.dataset.schema.names:
            raise ContractViolation(
                Promise.SCAN_VALUES,
                f"{doing} returned columns {table.schema.names}, not the dataset's "
                f"{ex.dataset.schema.names}",
            )
        expect_types(table, ex.dataset.schema, doing, Promise.SCAN_VALUES)
        expect_values(table, ex.rows, doing, Promise.SCAN_VALUES)


async def check_scan_honours_exclude(h: SinkHarness) -> None:
    """`scan(exclude=...)` for every subset of the partitions: none of theirs, all the rest."""
    async with _exported(h, "conformance_exclude") as ex:
        ids = sorted(ex.parts)
        for size in range(len(ids) + 1):
            for left_out in itertools.combinations(ids, size):
                doing = f"scan(exclude={set(left_out) or '{}'})"
                table = ex.scan(doing, Promise.SCAN_EXCLUDE, exclude=frozenset(left_out))
                want = [r for p in ids if p not in left_out for r in ex.parts[p]]
                got = ids_once(table, doing, Promise.SCAN_EXCLUDE)
                expect_ids(got, want, doing, Promise.SCAN_EXCLUDE)


async def check_scan_honours_projection(h: SinkHarness) -> None:
    """`scan(columns=...)`: those columns, in that order, exact types and values."""
    async with _exported(h, "conformance_projection") as ex:
        for columns in (["value", "row_id"], ["row_id", "key", "ts"]):
            doing = f"scan(columns={columns})"
            table = ex.scan(doing, Promise.SCAN_PROJECTION, columns=columns)
            if table.schema.names != columns:
                raise ContractViolation(
                    Promise.SCAN_PROJECTION, f"{doing} returned columns {table.schema.names}"
                )
            expect_types(table, ex.dataset.schema, doing, Promise.SCAN_PROJECTION)
            got = ids_once(table, doing, Promise.SCAN_PROJECTION)
            expect_ids(got, ex.rows, doing, Promise.SCAN_PROJECTION)
            expect_values(table, ex.rows, doing, Promise.SCAN_PROJECTION)


def _filters(ex: _Exported) -> list[tuple[str, Filter, Callable[[dict[str, Any]], bool]]]:
    from hypaware.core.filter import col

    values = sorted(r["value"] for r in ex.rows.values())
    mid = values[len(values) // 2]
    return [
        (f"col('value') >= {mid}", col("value") >= mid, lambda r: r["value"] >= mid),
        ("col('key') == 'k1'", col("key") == "k1", lambda r: r["key"] == "k1"),
        ("col('key').is_null()", col("key").is_null(), lambda r: r["key"] is None),
        (
            "~(col('key') == 'k1')",
            ~(col("key") == "k1"),
            lambda r: r["key"] is not None and r["key"] != "k1",
        ),
        (
            f"(col('value') < {mid}) | col('key').isin(['k2', 'k3'])",
            (col("value") < mid) | col("key").isin(["k2", "k3"]),
            lambda r: r["value"] < mid or r["key"] in ("k2", "k3"),
        ),
    ]


async def check_scan_honours_filter(h: SinkHarness) -> None:
    """`scan(filter=...)`: exactly the rows each filter passes, nulls passing no comparison."""
    from hypaware.core.filter_bind import bind_filter

    async with _exported(h, "conformance_filter") as ex:
        for text, tree, passes in _filters(ex):
            doing = f"scan(filter={text})"
            where = bind_filter(tree, ex.dataset.schema)
            table = ex.scan(doing, Promise.SCAN_FILTER, filter=where)
            want = [rid for rid, row in ex.rows.items() if passes(row)]
            got = ids_once(table, doing, Promise.SCAN_FILTER)
            expect_ids(got, want, doing, Promise.SCAN_FILTER)


QUERYABLE_CHECKS: dict[str, Callable[[SinkHarness], Awaitable[None]]] = {
    "scan_is_exact": check_scan_is_exact,
    "scan_honours_exclude": check_scan_honours_exclude,
    "scan_honours_projection": check_scan_honours_projection,
    "scan_honours_filter": check_scan_honours_filter,
    "query_after_lost_ack_reads_rows_once": check_query_after_lost_ack_reads_rows_once,
}
