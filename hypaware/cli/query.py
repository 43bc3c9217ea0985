"""``hypaware query --config FILE DATASET``: rows from the cache and a queryable sink.

Every row once (see `hypaware.query`). Output as a table that fits the
terminal (when piped, a table of whole cells, nothing cut, unless ``$COLUMNS``
is set), CSV, JSON Lines
or Parquet; timestamps print as ISO 8601 in UTC with a ``Z`` in the table,
CSV and JSON Lines; ``--sql`` runs DuckDB SQL over the same
rows, registered as a view named after the dataset. Exit status: 0 on
success, 2 for bad input (unknown dataset, sink or column, malformed time or
expression), 1 when a part of the data could not be read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import warnings
from collections.abc import Iterator
from datetime import date, datetime
from typing import IO, TYPE_CHECKING, Any

from hypaware.cli.common import add_config_argument, checked_config, iso_utc

if TYPE_CHECKING:
    import pyarrow as pa

    from hypaware.core.config import HypawareConfig

__all__ = ["format_table", "register", "run"]

FORMATS = ("table", "csv", "jsonl", "parquet")
_MIN_WIDTH = 4
_MAX_CELL = 60
_SAMPLE_ROWS = 200
_PROG = "hypaware query"


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "query",
        help="query a dataset across the cache and a queryable sink",
        description="Read a dataset's rows from the cache and one queryable sink, every row "
        "exactly once. --where takes a small filter language: comparisons "
        "(= != < <= > >=), in (...), is [not] null, combined with and/or/not; "
        "text in quotes, e.g. \"role = 'user' and tokens > 10\".",
    )
    add_config_argument(parser)
    parser.add_argument("dataset", metavar="DATASET", help="the dataset to read")
    parser.add_argument("--since", metavar="T", help="rows at or after T (ISO date or time, UTC)")
    parser.add_argument("--until", metavar="T", help="rows before T (ISO date or time, UTC)")
    parser.add_argument(
        "--key",
        action="append",
        metavar="V",
        help="a value of the dataset's lookup key (repeat for several)",
    )
    parser.add_argument("--columns", metavar="A,B", help="columns to return, comma-separated")
    parser.add_argument("--where", metavar="EXPR", help='a filter, e.g. "tokens > 10"')
    parser.add_argument("--limit", type=_limit, metavar="N", help="at most N rows")
    parser.add_argument("--format", choices=FORMATS, default="table", help="default: table")
    parser.add_argument("--output", metavar="FILE", help="write here instead of stdout")
    parser.add_argument(
        "--sink",
        metavar="NAME",
        action="append",
        help="the queryable sink to read (one: a query reads one sink besides the cache)",
    )
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help="if a sink cannot be read, print what the cache holds (with a warning)",
    )
    parser.add_argument(
        "--sql",
        metavar="QUERY",
        help="run DuckDB SQL over the rows, as a view named after the dataset",
    )
    parser.set_defaults(func=run)


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _error(message: str) -> None:
    for line in str(message).splitlines() or [""]:
        print(f"{_PROG}: error: {line}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    # Taken repeated like every --sink, so a second one is refused, not silently the one used.
    sinks = list(dict.fromkeys(args.sink or []))
    refusal = _refused_arguments(args, sinks)
    if refusal is not None:
        _error(refusal)
        return 2

    checked = checked_config("query", args)
    if isinstance(checked, int):
        return checked
    config, _plans = checked
    return _query(config, args, sinks)


def _refused_arguments(args: argparse.Namespace, sinks: list[str]) -> str | None:
    """Why the arguments cannot work together, checked before the config is read."""
    if args.format == "parquet" and args.output is None and sys.stdout.isatty():
        return "--format parquet writes binary: give --output FILE (or redirect stdout)"
    if args.sql is not None:
        try:
            import duckdb  # noqa: F401
        except ImportError:
            return "--sql needs DuckDB, which is not installed: pip install 'hypaware[query]'"
    if len(sinks) > 1:
        named = ", ".join(repr(s) for s in sinks)
        return f"a query reads one sink besides the cache; --sink named {named}: give one"
    return None


def _query(config: HypawareConfig, args: argparse.Namespace, sinks: list[str]) -> int:
    """Run the query and write its rows; the exit status, each failure reported on stderr."""
    from hypaware.core.errors import ConfigError, HypawareError, PluginError
    from hypaware.querying.api import CacheOnlyWarning
    from hypaware.querying.errors import QueryError, SourceUnreadableError

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CacheOnlyWarning)
        try:
            _plan_and_write(config, args, sinks, caught)
        except SourceUnreadableError as exc:
            _error(str(exc))
            return 1
        except ConfigError as exc:
            for problem in exc.problems:
                _error(str(problem))
            return 2
        except (QueryError, PluginError) as exc:
            _error(str(exc))
            return 2
        except _SqlError as exc:
            _error(f"--sql: {exc}")
            return 2
        except HypawareError as exc:
            _error(str(exc))
            return 1
        except BrokenPipeError:
            return 0
        finally:
            _notes(caught)
    return 0


def _plan_and_write(
    config: HypawareConfig,
    args: argparse.Namespace,
    sinks: list[str],
    caught: list[warnings.WarningMessage],
) -> None:
    import asyncio

    from hypaware.querying.api import plan_query

    _plan, reader = asyncio.run(
        plan_query(
            config,
            args.dataset,
            columns=args.columns,
            since=args.since,
            until=args.until,
            keys=args.key,
            where=args.where,
            limit=None if args.sql else args.limit,
            sink=sinks[0] if sinks else None,
            allow_partial=args.allow_partial,
        )
    )
    _notes(caught)
    if args.sql is not None:
        reader = _sql(reader, args.dataset, args.sql, args.limit)
    _write(reader, args)


def _notes(caught: list[warnings.WarningMessage]) -> None:
    from hypaware.querying.api import CacheOnlyWarning

    for w in caught:
        if not issubclass(w.category, CacheOnlyWarning):
            continue
        print(f"{_PROG}: warning: {w.message}", file=sys.stderr)
    caught.clear()


class _SqlError(Exception):
    pass


def _sql(reader: pa.RecordBatchReader, dataset: str, sql: str, limit: int | None) -> Any:
    import duckdb

    con = duckdb.connect()
    try:
        con.register(dataset, reader)
        relation: Any = con.sql(sql)
        if relation is None:
            raise _SqlError("expected a query (SELECT ...), not a statement")
        # DuckDB 2 names it to_arrow_reader, 1.x fetch_record_batch.
        fetch = getattr(relation, "to_arrow_reader", None) or relation.fetch_record_batch
        out = fetch()
    except duckdb.Error as exc:
        con.close()
        raise _SqlError(str(exc).splitlines()[0]) from exc
    if limit is None:
        return out
    import pyarrow as pa

    def batches() -> Iterator[pa.RecordBatch]:
        left = limit
        for batch in out:
            if left <= 0:
                break
            batch = batch.slice(0, left)
            left -= batch.num_rows
            yield batch

    return pa.RecordBatchReader.from_batches(out.schema, batches())


def _write(reader: pa.RecordBatchReader, args: argparse.Namespace) -> None:
    binary = args.format == "parquet"
    if args.output is not None:
        with open(args.output, "wb" if binary else "w", encoding=None if binary else "utf-8") as f:
            _emit(reader, args.format, f)
        return
    _emit(reader, args.format, sys.stdout.buffer if binary else sys.stdout)


def _emit(reader: pa.RecordBatchReader, fmt: str, out: IO[Any]) -> None:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        with pq.ParquetWriter(out, reader.schema) as writer:
            for batch in reader:
                writer.write_batch(batch)
    elif fmt == "csv":
        import pyarrow.csv as pacsv

        buffer = _TextSink(out)
        schema = _text_schema(reader.schema)
        with pacsv.CSVWriter(buffer, schema) as writer:
            for batch in reader:
                writer.write_batch(_as_text(batch, schema))
    elif fmt == "jsonl":
        for batch in reader:
            for row in batch.to_pylist(maps_as_pydicts="lossy"):
                out.write(json.dumps(row, default=_json_value, ensure_ascii=False) + "\n")
    else:
        # Piped or redirected, nothing is cut: the reader gets every cell whole
        # (unless $COLUMNS asks for a width, as it does for a terminal).
        tty = getattr(out, "isatty", lambda: False)() or "COLUMNS" in os.environ
        width = shutil.get_terminal_size((100, 24)).columns if tty else None
        for line in format_table(reader, width):
            out.write(line + "\n")


def _needs_text(type_: pa.DataType) -> bool:
    """Columns CSV has no form for: timestamps (ours is ``...Z``) and nested values."""
    import pyarrow as pa

    return bool(pa.types.is_timestamp(type_) or pa.types.is_nested(type_))


def _text_schema(schema: pa.Schema) -> pa.Schema:
    import pyarrow as pa

    for i, field in enumerate(schema):
        if _needs_text(field.type):
            schema = schema.set(i, field.with_type(pa.string()))
    return schema


def _as_text(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Timestamps in the one text form every output uses, nested values as JSON text."""
    import pyarrow as pa

    if batch.schema.equals(schema):
        return batch
    columns = []
    for column in batch.columns:
        if pa.types.is_timestamp(column.type):
            column = pa.array([_iso(v) for v in column.to_pylist()], pa.string())
        elif pa.types.is_nested(column.type):
            values = column.to_pylist(maps_as_pydicts="lossy")
            column = pa.array([None if v is None else _json_text(v) for v in values], pa.string())
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _json_text(value: Any) -> str:
    return json.dumps(value, default=_json_value, ensure_ascii=False)


def _iso(value: Any) -> str | None:
    return iso_utc(value) if isinstance(value, datetime) else value


class _TextSink:
    """A binary file interface writing UTF-8 into a text stream (for pyarrow's CSV writer)."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.closed = False

    def write(self, data: bytes) -> int:
        self.out.write(bytes(data).decode("utf-8"))
        return len(data)

    def flush(self) -> None:
        self.out.flush()

    def close(self) -> None:
        self.closed = True


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _cell(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, datetime):
        return iso_utc(value) or ""
    # Lists, structs and maps as JSON text, as in CSV, not as Python reprs.
    text = _json_text(value) if isinstance(value, list | dict) else str(value)
    return text.replace("\n", " ").replace("\t", " ")


def _fit(natural: list[int], floors: list[int], width: int) -> list[int]:
    """Column widths (shrinking the widest first, none below its floor) so a row fits
    `width`; 0 drops a column (from the right) when even the floors do not fit."""
    widths = list(natural)
    gaps = 2 * (len(widths) - 1)
    while sum(widths) + gaps > width:
        shrinkable = [i for i, w in enumerate(widths) if w > floors[i]]
        if shrinkable:
            widest = max(shrinkable, key=lambda i: widths[i])
            widths[widest] -= 1
            continue
        last = max(i for i, w in enumerate(widths) if w > 0)
        if last == 0:
            break
        widths[last] = 0
        gaps = 2 * (sum(1 for w in widths if w > 0) - 1)
    return widths


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def format_table(reader: pa.RecordBatchReader, width: int | None) -> Iterator[str]:
    """Lines of a plain-text table no wider than `width`, ending with a row count.

    Column widths come from the first rows; longer cells are cut with ``…``
    and columns that cannot fit are left out (and named in the footer).
    With `width` None (output that is not a terminal) nothing is cut.
    """
    names = list(reader.schema.names)
    rows: list[list[str]] = []
    total = 0
    batches = iter(reader)
    for batch in batches:
        for row in batch.to_pylist(maps_as_pydicts="lossy"):
            rows.append([_cell(v) for v in row.values()])
        if len(rows) >= _SAMPLE_ROWS:
            break
    cap = _MAX_CELL if width is not None else sys.maxsize
    natural = [
        min(max([len(n)] + [len(r[i]) for r in rows[:_SAMPLE_ROWS]]), cap)
        for i, n in enumerate(names)
    ]
    # A column keeps room for its name (up to a point) before any column is dropped.
    floors = [
        min(n, max(_MIN_WIDTH, min(len(name), 8))) for n, name in zip(natural, names, strict=True)
    ]
    widths = natural if width is None else _fit(natural, floors, width)
    shown = [i for i, w in enumerate(widths) if w > 0]

    def line(cells: list[str]) -> str:
        if width is None:
            return "  ".join(cells[i].ljust(widths[i]) for i in shown).rstrip()
        return "  ".join(_clip(cells[i], widths[i]).ljust(widths[i]) for i in shown).rstrip()

    yield line(names)
    yield "  ".join("-" * widths[i] for i in shown)
    for r in rows:
        total += 1
        yield line(r)
    for batch in batches:
        for row in batch.to_pylist(maps_as_pydicts="lossy"):
            total += 1
            yield line([_cell(v) for v in row.values()])
    footer = f"({total} row{'s' if total != 1 else ''})"
    hidden = [names[i] for i, w in enumerate(widths) if w == 0]
    if hidden:
        footer += f"; not shown (too wide for the terminal): {', '.join(hidden)}"
    yield footer
