"""Reading exported objects back with pyarrow.dataset, DuckDB and fastparquet, and checking them."""

from __future__ import annotations

import io
import re
import warnings
from collections import Counter
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from hypaware.blob.receipts import RECEIPTS_DIR
from hypaware.core.contracts import BlobStore
from hypaware.core.paths import encode_segment

from .data import TIME, utc_day

NAME = re.compile(r"^part-[0-9a-f]{32}-\d{4}\.parquet$")


async def mirror(store: BlobStore, dest: Path, prefix: str = "") -> list[str]:
    """Copy every data object of `store` into `dest`; returns their paths.

    The sink's receipts (`hypaware.blob.receipts`) are not data: left out.
    """
    paths = []
    async for meta in store.list(prefix):
        if meta.path.startswith(RECEIPTS_DIR + "/"):
            continue
        target = dest / meta.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(await store.get(meta.path))
        paths.append(meta.path)
    return sorted(paths)


def check_layout(paths: list[str], dataset: str) -> None:
    """Every path is `<dataset>/date=<day>/part-<hash>-<index>.parquet`."""
    for path in paths:
        top, date, name = path.split("/")
        assert top == encode_segment(dataset)
        assert re.fullmatch(r"date=(\d{4}-\d{2}-\d{2}|__HIVE_DEFAULT_PARTITION__)", date), path
        assert NAME.match(name), path


def read_pyarrow(root: Path, dataset: str, filesystem: Any = None) -> pa.Table:
    """The dataset through pyarrow.dataset with hive partitioning (``date`` as a string)."""
    partitioning = ds.partitioning(pa.schema([("date", pa.string())]), flavor="hive")
    source = (
        str(root / encode_segment(dataset))
        if filesystem is None
        else f"{root}/{encode_segment(dataset)}"
    )
    return ds.dataset(
        source, format="parquet", partitioning=partitioning, filesystem=filesystem
    ).to_table()


def check_pyarrow(table: pa.Table, expected: pa.Table) -> None:
    """Same rows, values and types; ``date`` is each row's UTC day (null for a null time)."""
    got = table.sort_by("row_id")
    assert got.drop_columns(["date"]).schema.equals(expected.schema)
    assert got.drop_columns(["date"]).equals(expected)
    days = [
        "__HIVE_DEFAULT_PARTITION__" if d is None else d for d in got.column("date").to_pylist()
    ]
    assert days == [utc_day(v) for v in got.column(TIME).to_pylist()]


DUCKDB_TYPES = {
    "row_id": "BIGINT",
    "ts": "TIMESTAMP WITH TIME ZONE",
    "local_ts": "TIMESTAMP WITH TIME ZONE",
    "naive_ts": "TIMESTAMP_NS",
    "day": "DATE",
    "name": "VARCHAR",
    "count": "INTEGER",
    "small": "TINYINT",
    "big": "UBIGINT",
    "score": "DOUBLE",
    "ratio": "FLOAT",
    "ok": "BOOLEAN",
    "blob": "BLOB",
    "price": "DECIMAL(12,3)",
    "tags": "VARCHAR[]",
    "meta": "STRUCT(k VARCHAR, n BIGINT)",
    "attrs": "MAP(VARCHAR, INTEGER)",
    "date": "DATE",
}


def check_duckdb(root: Path, dataset: str, expected: pa.Table) -> None:
    """DuckDB's read_parquet over the hive layout: SQL types, values, and the date column."""
    import duckdb

    glob = f"{root / encode_segment(dataset)}/*/*.parquet"
    con = duckdb.connect()
    try:
        rel = con.sql(
            f"SELECT * FROM read_parquet('{glob}', hive_partitioning = true) ORDER BY row_id"
        )
        types = {name: str(t) for name, t in zip(rel.columns, rel.types, strict=True)}
        assert types == {k: v for k, v in DUCKDB_TYPES.items() if k in types}
        assert set(types) == set(expected.schema.names) | {"date"}
        result = rel.to_arrow_table()
        assert result.drop_columns(["date"]).cast(expected.schema).equals(expected)
        days = con.sql(
            f"SELECT date, count(*) FROM read_parquet('{glob}', hive_partitioning = true) GROUP BY ALL"
        ).fetchall()
        want = Counter(utc_day(v) for v in expected.column(TIME).to_pylist())
        got = {("__HIVE_DEFAULT_PARTITION__" if d is None else d.isoformat()): n for d, n in days}
        assert got == dict(want)
    finally:
        con.close()


def _norm(value: Any) -> Any:
    """One spelling for a value as fastparquet (via pandas) or pyarrow hands it out."""
    import numpy as np
    import pandas as pd

    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    if isinstance(value, datetime):
        # fastparquet hands zoned timestamps back as naive UTC.
        return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
    if isinstance(value, date):
        # fastparquet reads dates as timestamps at midnight.
        return datetime(value.year, value.month, value.day)
    if isinstance(value, np.generic):
        return _norm(value.item())
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, np.ndarray | list | tuple):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    return value


def check_fastparquet(files: list[Path], expected: pa.Table) -> None:
    """Every object through fastparquet: the same values for every column it can read.

    fastparquet cannot read a struct field under a null struct (`meta`), reads
    decimals as floats, maps as dicts, and zoned timestamps as naive UTC.
    """
    import fastparquet
    import pandas as pd

    frames = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for path in files:
            # From bytes: fastparquet leaves files it opens by name open.
            pf = fastparquet.ParquetFile(io.BytesIO(path.read_bytes()))
            frames.append(pf.to_pandas(columns=[c for c in pf.columns if not c.startswith("meta")]))
    frame = pd.concat(frames).sort_values("row_id").reset_index(drop=True)
    assert len(frame) == expected.num_rows
    assert str(frame["row_id"].dtype) == "int64"
    assert str(frame["count"].dtype) == "Int32"
    assert str(frame["score"].dtype) == "float64"
    assert str(frame["ok"].dtype) == "boolean"
    assert str(frame["ts"].dtype).startswith("datetime64")
    for column in frame.columns:
        want = expected.column(column).to_pylist()
        if column == "attrs":
            want = [None if v is None else dict(v) for v in want]
        got = [_norm(v) for v in frame[column].tolist()]
        if column == "price":  # decimals come back as binary floats
            got = [None if v is None else round(v, 3) for v in got]
        assert got == [_norm(v) for v in want], (column, got[:5], want[:5])


async def check_store(store: BlobStore, tmp: Path, dataset: str, expected: pa.Table) -> list[str]:
    """Mirror the store locally and check it with all three readers; returns the object paths."""
    paths = await mirror(store, tmp)
    mine = [p for p in paths if p.startswith(encode_segment(dataset) + "/")]
    check_layout(mine, dataset)
    check_pyarrow(read_pyarrow(tmp, dataset), expected)
    check_duckdb(tmp, dataset, expected)
    check_fastparquet([tmp / p for p in mine], expected)
    return mine
