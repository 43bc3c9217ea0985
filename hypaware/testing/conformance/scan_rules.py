"""How the queryable checks judge what a scan returned: row sets, exact types, values.

Each judgement raises `ContractViolation` with the promise the caller names,
so a scan that ignores its filter is reported under the filter's rule, not
under `exclude`'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from hypaware.testing.conformance.promises import ContractViolation, Promise

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["expect_ids", "expect_types", "expect_values", "ids_once"]


def ids_once(table: pa.Table, doing: str, promise: Promise) -> Counter[str]:
    """The row ids `table` holds; a row returned twice breaks `promise`."""
    if "row_id" not in table.column_names:
        raise ContractViolation(promise, f"{doing} returned no 'row_id' column")
    counts = Counter(str(r) for r in table.column("row_id").to_pylist())
    twice = sorted(r for r, n in counts.items() if n > 1)
    if twice:
        raise ContractViolation(
            promise, f"{doing} returned {len(twice)} row(s) twice (e.g. {twice[:3]})"
        )
    return counts


def expect_ids(counts: Counter[str], expected: Iterable[str], doing: str, promise: Promise) -> None:
    """The ids returned are exactly `expected`."""
    want = set(expected)
    missing = sorted(want - set(counts))
    extra = sorted(set(counts) - want)
    if missing or extra:
        raise ContractViolation(
            promise,
            f"{doing} returned {len(extra)} row(s) it should not (e.g. {extra[:3]}) and "
            f"missed {len(missing)} of {len(want)} (e.g. {missing[:3]})",
        )


def expect_types(table: pa.Table, schema: pa.Schema, doing: str, promise: Promise) -> None:
    """Every column of `table` has exactly the type `schema` gives it."""
    for field in table.schema:
        want = schema.field(field.name).type
        if field.type != want:
            raise ContractViolation(
                promise,
                f"{doing} returned {field.name!r} as {field.type}, not the dataset's {want}",
            )


def expect_values(
    table: pa.Table, expected: Mapping[str, Mapping[str, Any]], doing: str, promise: Promise
) -> None:
    """Each returned row's values equal the exported row's (`expected` by row id)."""
    wrong: list[str] = []
    first = ""
    for row in table.to_pylist():
        want = expected[str(row["row_id"])]
        for name, value in row.items():
            if value != want[name] or (value is None) != (want[name] is None):
                if not first:
                    first = (
                        f"row {row['row_id']!r} column {name!r} is {value!r}, "
                        f"exported as {want[name]!r}"
                    )
                wrong.append(name)
    if wrong:
        columns = sorted(set(wrong))
        raise ContractViolation(
            promise,
            f"{doing} returned {len(wrong)} wrong value(s) in column(s) {columns} (e.g. {first})",
        )
