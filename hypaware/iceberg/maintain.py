"""Table maintenance: what keeps a table of a year of small passes as cheap as a new one.

`maintain_table` runs, in order:

1. **properties**: a table made before these defaults existed gets those it
   does not name itself (old ``metadata.json`` files deleted after each
   commit, the newest 100 kept; manifests merged once there are
   `merge_manifests_at`). A key the table already has is left as it is.
2. **compaction** of closed days (`hypaware.iceberg.compact`).
3. **snapshot expiry** and the deletion of files only expired snapshots
   read (`hypaware.iceberg.expire`).
4. **leftovers**: compaction outputs no snapshot references, older than
   `keep_for` and at least an hour (a compaction that died before its
   commit; one still between its write and its commit is younger).

Each step commits on its own, and each is safe to lose a race: a commit
that lost to another writer is planned again from the refreshed table (the
sink's `commit_retries`), and a compaction that lost to another compaction
is dropped until the next run. A failing step is reported, and the later
steps still run.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import obstore
from pyiceberg.exceptions import CommitFailedException, ValidationError, ValidationException

from hypaware.iceberg import day_layout
from hypaware.iceberg.catalog import _brief, is_conflict, retrying
from hypaware.iceberg.compact import compact_bin, is_compaction_output, live_files, plan_compaction
from hypaware.iceberg.expire import expire_snapshots, plan_expiry, reachable

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from hypaware.core.contracts import Encoder
    from hypaware.core.types import DatasetInfo
    from hypaware.iceberg.config import IcebergConfig
    from hypaware.iceberg.datafiles import DataFileWriter

__all__ = ["TableMaintenance", "maintain_table", "wanted_properties"]

log = logging.getLogger("hypaware.iceberg.table_format")

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
LEFTOVER_MIN_AGE = 3600.0


@attrs.frozen
class TableMaintenance:
    """What one maintenance run did to one dataset's table."""

    dataset: str
    properties_set: tuple[str, ...] = ()
    days_compacted: tuple[str, ...] = ()
    files_replaced: int = 0
    files_written: int = 0
    compactions_lost: int = 0
    snapshots_expired: int = 0
    files_deleted: int = 0
    leftovers_deleted: int = 0
    errors: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(
            self.properties_set
            or self.files_replaced
            or self.snapshots_expired
            or self.files_deleted
            or self.leftovers_deleted
        )

    def as_dict(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        for key in ("properties_set", "days_compacted", "errors"):
            out[key] = list(out[key])
        return out


def wanted_properties(config: IcebergConfig) -> dict[str, str]:
    """The table properties hypaware sets on its tables (at creation, and on older ones)."""
    return {
        "write.format.default": "parquet",
        # Without it a table keeps every metadata.json it ever had (89 MB at
        # 400 passes); a writer 100 commits behind reloads from the catalog.
        "write.metadata.delete-after-commit.enabled": "true",
        "write.metadata.previous-versions-max": "100",
        # Commits are merge-appends: this keeps the manifest list short.
        "commit.manifest-merge.enabled": "true",
        "commit.manifest.min-count-to-merge": str(config.maintenance.merge_manifests_at),
    }


def maintain_table(
    table: Table,
    dataset: DatasetInfo,
    *,
    config: IcebergConfig,
    files: DataFileWriter,
    encoder: Encoder,
    sink: str,
    what: str,
    now: dt.datetime,
    wall_ms: Callable[[], int] | None = None,
    before_commit: Callable[[], None] | None = None,
) -> TableMaintenance:
    """Run every step on `table` (see the module doc).

    `now` is the driver's clock: it says which days are closed. Snapshot
    ages are measured with `wall_ms` (default the system clock), the clock
    snapshots are stamped with. `before_commit` runs before each
    compaction's commit (tests make a concurrent writer commit there).
    """
    run = _Run(
        table,
        dataset,
        config,
        files,
        encoder,
        sink,
        what,
        now,
        wall_ms or (lambda: int(time.time() * 1000)),
        before_commit,
    )
    run.step("setting table properties", run.properties)
    if config.maintenance.compact:
        run.step("compaction", run.compact)
    run.step("snapshot expiry", run.expire)
    run.step("removing leftover compaction files", run.leftovers)
    out = TableMaintenance(dataset=dataset.name, **run.result, errors=tuple(run.errors))
    if out.changed or out.errors:
        log.info(
            "%s: maintenance: %d files compacted into %d, %d snapshots expired, "
            "%d files deleted, %d leftovers removed",
            what,
            out.files_replaced,
            out.files_written,
            out.snapshots_expired,
            out.files_deleted,
            out.leftovers_deleted,
            extra={"sink": sink, "maintenance": out.as_dict()},
        )
    return out


@attrs.define
class _Run:
    """One maintenance run of one table: its steps, and what they did."""

    table: Table
    dataset: DatasetInfo
    config: IcebergConfig
    files: DataFileWriter
    encoder: Encoder
    sink: str
    what: str
    now: dt.datetime
    wall_ms: Callable[[], int]
    before_commit: Callable[[], None] | None
    result: dict[str, Any] = attrs.field(factory=dict)
    errors: list[str] = attrs.field(factory=list)

    def step(self, name: str, fn: Callable[[], None]) -> None:
        """Run one step; a failure is noted and the next step runs."""
        try:
            fn()
        except Exception as exc:
            self.errors.append(f"{self.what}: {name}: {_brief(exc)}")
            log.warning("%s: maintenance: %s failed: %s", self.what, name, _brief(exc))

    def properties(self) -> None:
        table, config = self.table, self.config

        def apply() -> tuple[str, ...]:
            table.refresh()
            current = table.metadata.properties
            missing = {k: v for k, v in wanted_properties(config).items() if k not in current}
            if missing:
                with table.transaction() as tx:
                    tx.set_properties(missing)
            return tuple(sorted(missing))

        self.result["properties_set"] = _retry(apply, config)

    def compact(self) -> None:
        closed = self.now - dt.timedelta(seconds=self.config.maintenance.compact_after)
        closed_before = (closed.astimezone(dt.UTC).date() - _EPOCH.date()).days
        self.table.refresh()
        bins = plan_compaction(
            live_files(self.table),
            target_size=self.config.target_file_size,
            closed_before=closed_before,
        )
        days: dict[str, None] = {}
        replaced = written = lost = 0
        for bin in bins:
            try:
                out = compact_bin(
                    self.table,
                    self.dataset,
                    bin,
                    files=self.files,
                    encoder=self.encoder,
                    sink=self.sink,
                    what=self.what,
                    before_commit=self.before_commit,
                )
            except (CommitFailedException, ValidationError, ValidationException) as exc:
                # Another writer changed these files first; the next run plans again.
                lost += 1
                log.info(
                    "%s: compaction of day %s lost a race: %s", self.what, bin.day, _brief(exc)
                )
                continue
            days[day_layout.day_label(bin.day)] = None
            replaced += len(bin.files)
            written += len(out)
        self.result.update(
            days_compacted=tuple(days),
            files_replaced=replaced,
            files_written=written,
            compactions_lost=lost,
        )

    def expire(self) -> None:
        table, maint = self.table, self.config.maintenance

        def apply() -> tuple[int, int]:
            table.refresh()
            plan = plan_expiry(
                table,
                keep_snapshots=maint.keep_snapshots,
                keep_for_ms=int(maint.keep_for * 1000),
                now_ms=self.wall_ms(),
            )
            return expire_snapshots(table, plan, delete=table.io.delete)

        expired, deleted = _retry(apply, self.config)
        self.result.update(snapshots_expired=expired, files_deleted=deleted)

    def leftovers(self) -> None:
        # Never younger than an hour, whatever keep_for says: another process's
        # compaction may be between writing its files and committing them.
        age = max(self.config.maintenance.keep_for, LEFTOVER_MIN_AGE)
        self.result["leftovers_deleted"] = _delete_leftovers(
            self.table, self.files, self.sink, older_than_ms=self.wall_ms() - int(age * 1000)
        )


def _retry(fn: Callable[[], Any], config: IcebergConfig) -> Any:
    return retrying(
        fn, retry_on=is_conflict, attempts=config.commit_retries, backoff=config.commit_backoff
    )


def _delete_leftovers(table: Table, files: DataFileWriter, sink: str, *, older_than_ms: int) -> int:
    root = files.root
    prefix = root.key(f"{table.location().rstrip('/')}/data", "list") + "/"
    candidates: list[tuple[str, str]] = []
    base = root.url.rstrip("/")
    strip = f"{root.prefix}/" if root.prefix else ""
    try:
        for chunk in obstore.list(root.store, prefix=prefix):
            for meta in chunk:
                key = meta["path"]
                modified = meta["last_modified"].timestamp() * 1000
                if modified < older_than_ms and is_compaction_output(key, sink):
                    rel = key[len(strip) :] if strip and key.startswith(strip) else key
                    candidates.append((key, f"{base}/{rel}"))
    except FileNotFoundError:
        return 0
    if not candidates:
        return 0
    table.refresh()
    _, live = reachable(table)
    deleted = 0
    for key, location in candidates:
        if location in live:
            continue
        try:
            obstore.delete(root.store, key)
            deleted += 1
        except FileNotFoundError:
            pass
    return deleted
