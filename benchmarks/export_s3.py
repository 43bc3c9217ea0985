"""Export to S3 (moto on loopback) as Parquet: hypaware against a plain obstore put.

The plain side is what a script would do without hypaware: encode the same
table with ``pyarrow.parquet.write_table`` (same compression, row group
size and dictionary limit) into memory, then ``obstore.put`` those bytes
into the same bucket.
hypaware streams each day's file straight from the encoder into the store
(multipart above 8 MiB), never holding a whole file. Target: ratio <= 1.20.

    python -m benchmarks.export_s3 [--rows 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import shutil
import tempfile
from pathlib import Path

import obstore
import pyarrow as pa
from obstore.store import S3Store

from hypaware import ExportOptions
from hypaware.testing.servers.peers import run_moto

from . import datagen
from ._common import build_sink, day_batch, plain_write_table, report, run_repeated, timer

TARGET = 1.20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)

    tbl = datagen.table(args.rows, seed=args.seed)
    batch = day_batch(tbl)
    work = Path(tempfile.mkdtemp(prefix="hypaware-bench-"))
    ours: list[float] = []
    theirs: list[float] = []
    ours_cpu: list[float] = []
    theirs_cpu: list[float] = []
    written: dict[str, int] = {}
    runs = itertools.count()

    with run_moto("bench") as peer:
        store = S3Store(peer.bucket, **peer.store_kwargs())  # type: ignore[arg-type]

        def hypaware_side() -> None:
            config = {
                "bucket": peer.bucket,
                "endpoint": peer.endpoint,
                "region": peer.region,
                "access_key_id": peer.access_key_id,
                "secret_access_key": peer.secret_access_key,
                "prefix": f"hypaware-{next(runs)}",
            }

            async def export() -> None:
                sink = build_sink("@hypaware/s3", config, work / "state")
                with timer(ours, ours_cpu):
                    result = await sink.export_batch(batch, ExportOptions())
                    await sink.close()
                assert not result.retry_partitions, result.retry_partitions
                assert result.rows_written == args.rows
                written.update(files=result.files_written, bytes=result.bytes_written)

            asyncio.run(export())

        def plain_side() -> None:
            with timer(theirs, theirs_cpu):
                sink = pa.BufferOutputStream()
                plain_write_table(tbl, sink)
                data = sink.getvalue()
                obstore.put(store, f"plain-{next(runs)}.parquet", data.to_pybytes())
            written["plain_bytes"] = data.size

        try:
            run_repeated(args.repeat, hypaware_side, plain_side)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    ok = report(
        "export to S3 (moto) as Parquet",
        args.rows,
        ours,
        theirs,
        "write_table+put",
        TARGET,
        (ours_cpu, theirs_cpu),
    )
    print(
        f"  output: hypaware {written['files']} objects, {written['bytes'] / 2**20:,.1f} MiB; "
        f"plain 1 object, {written['plain_bytes'] / 2**20:,.1f} MiB"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
