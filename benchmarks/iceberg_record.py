"""The cost of reading an Iceberg table's exactly-once record as its history grows.

A table is given N snapshots the way hypaware leaves them: each an append
of a small file whose summary carries the cumulative per-cache record
(`hypaware.iceberg.record`), four caches taking turns. Then, at 50 and at
N snapshots, it times:

- ``read_record``: what every commit and every query does (one look at the
  newest snapshot), with the newest snapshot hypaware's, and with 20
  snapshots of another engine on top (the walk back past them);
- ``scan summaries``: reading every snapshot's summary, what deciding by
  partition ids listed per snapshot had to do (the reference);
- ``load_table``: the catalog load every pass pays anyway, for scale.

Medians of repeated calls, in one run:

    python -m benchmarks.iceberg_record [--snapshots 2000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa


def _median(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _grow(catalog: Any, name: str, snapshots: int, foreign: int) -> Any:
    """A table with `snapshots` hypaware snapshots and `foreign` other-engine ones on top.

    One real append makes a data file and a manifest list; every further
    snapshot is added to the metadata directly, reusing that manifest list,
    as the record lives in the summaries alone. Building thousands of real
    appends costs O(n^2) in manifest-list rewrites and is not what is timed.
    """
    from pyiceberg.table.refs import SnapshotRefType
    from pyiceberg.table.snapshots import Operation, Snapshot, Summary
    from pyiceberg.table.update import AddSnapshotUpdate, SetSnapshotRefUpdate

    from hypaware.iceberg.record import SUMMARY_RECORD, SUMMARY_WRITER, TableRecord

    schema = pa.schema([("ts", pa.int64()), ("v", pa.string())])
    table = catalog.create_table(name, schema=schema)
    record = TableRecord().with_commit("cache-00000000", "archive", [1], 0)
    table.append(
        pa.table({"ts": [1], "v": ["x"]}, schema=schema),
        snapshot_properties={
            "hypaware.batch-id": "b0",
            SUMMARY_WRITER: "cache-00000000",
            SUMMARY_RECORD: record.dumps(),
        },
    )
    base = table.current_snapshot()
    assert base is not None
    parent, seq, ts = base.snapshot_id, base.sequence_number, base.timestamp_ms
    made = 1
    while made < snapshots + foreign:
        updates: list[Any] = []
        for _ in range(min(250, snapshots + foreign - made)):
            if made < snapshots:
                key = f"cache-{made % 4:08d}"
                record = record.with_commit(key, "archive", [made // 4 + 1], 0)
                props = {
                    "hypaware.batch-id": f"b{made}",
                    SUMMARY_WRITER: key,
                    SUMMARY_RECORD: record.dumps(),
                }
            else:
                props = {}
            seq, ts = seq + 1, ts + 1
            snap = Snapshot(
                snapshot_id=parent + 1,
                parent_snapshot_id=parent,
                sequence_number=seq,
                timestamp_ms=ts,
                manifest_list=base.manifest_list,
                summary=Summary(Operation.APPEND, **props),
                schema_id=base.schema_id,
            )
            updates.append(AddSnapshotUpdate(snapshot=snap))
            parent = snap.snapshot_id
            made += 1
        updates.append(
            SetSnapshotRefUpdate(ref_name="main", type=SnapshotRefType.BRANCH, snapshot_id=parent)
        )
        with table.transaction() as tx:
            tx._apply(tuple(updates))
    return catalog.load_table(name)


def measure(snapshots: int, repeat: int) -> list[tuple[str, int, float]]:
    from pyiceberg.catalog.sql import SqlCatalog

    from hypaware.iceberg.record import read_record

    out: list[tuple[str, int, float]] = []
    with tempfile.TemporaryDirectory(prefix="hyp-record-") as tmp:
        catalog = SqlCatalog(
            "bench", uri=f"sqlite:///{Path(tmp) / 'c.db'}", warehouse=f"file://{tmp}"
        )
        catalog.create_namespace("b")
        for n in sorted({50, snapshots}):
            for foreign in (0, 20):
                table = _grow(catalog, f"b.t{n}_{foreign}", n, foreign)
                total = len(table.metadata.snapshots)
                label = "read_record" + (" (20 foreign on top)" if foreign else "")
                out.append((label, total, _median(lambda t=table: read_record(t, "b"), repeat)))
                if not foreign:

                    def scan(t: Any = table) -> int:
                        return sum(len(s.summary.additional_properties) for s in t.snapshots())

                    out.append(("scan summaries", total, _median(scan, repeat)))
                    name = f"b.t{n}_{foreign}"
                    out.append(
                        ("load_table", total, _median(lambda n=name: catalog.load_table(n), 20))
                    )
        catalog.engine.dispose()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshots", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args(argv)
    rows = measure(args.snapshots, args.repeat)
    print(f"{'what':<32} {'snapshots':>9} {'median':>12}")
    for what, n, seconds in rows:
        print(f"{what:<32} {n:>9} {seconds * 1e6:>10.1f} us")
    # The target: the record costs the same at N snapshots as at 50 (within noise).
    small = next(s for w, n, s in rows if w == "read_record" and n == 50)
    large = [s for w, n, s in rows if w == "read_record" and n > 50]
    if large and large[-1] > 3 * small + 50e-6:
        print(
            f"MISSED: read_record at {args.snapshots} snapshots is {large[-1] / small:.1f}x at 50"
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
