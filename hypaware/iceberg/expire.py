"""Snapshot expiry: a table's history cut back to what its record and its readers need.

A table that gains a snapshot every five minutes pays for its whole history
on every commit (each ``metadata.json`` lists every snapshot) and keeps
every manifest list on disk. `expire_snapshots` removes the snapshots that
are all of:

- older than `keep_for` seconds (a reader planned against a snapshot may
  still be reading its files);
- not among the newest `keep_snapshots`;
- not on the way from the current snapshot back to the newest one that
  carries the exactly-once record (`hypaware.iceberg.record`): the record
  is read by walking that chain, so cutting it would lose the record;
- not a snapshot of a batch committed before the table had a record, while
  that record is younger than `LEGACY_GRACE_MS`: only such a snapshot tells
  a batch pending since then that it already landed.

Then the files only the removed snapshots referenced are deleted: their
manifest lists, the manifests no remaining snapshot lists, and the data
files those manifests name that no remaining manifest holds (files a
compaction replaced). Files are found by reachability from the snapshots
that remain, as Iceberg's own expiry does, so a file another snapshot still
reads is never deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs
from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.table.update.snapshot import ExpireSnapshots

from hypaware.iceberg.commit import SUMMARY_BATCH_ID, ViewTransaction
from hypaware.iceberg.record import SUMMARY_RECORD, _ancestry, read_record

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

__all__ = [
    "LEGACY_GRACE_MS",
    "ExpiryPlan",
    "delete_unreachable",
    "expire_snapshots",
    "plan_expiry",
    "reachable",
]

log = logging.getLogger("hypaware.iceberg.table_format")

# A batch begun before the table had a record is looked up by its batch id
# (`hypaware.iceberg.table_format._begun_before`): a week is far longer than
# any batch stays pending.
LEGACY_GRACE_MS = 7 * 24 * 3600 * 1000


@attrs.frozen
class ExpiryPlan:
    """The snapshots to remove (`expire`) and to keep, by id."""

    expire: frozenset[int]
    keep: frozenset[int]


def plan_expiry(table: Table, *, keep_snapshots: int, keep_for_ms: int, now_ms: int) -> ExpiryPlan:
    """Which snapshots `expire_snapshots` would remove now (see the module doc)."""
    metadata = table.metadata
    snapshots = list(metadata.snapshots)
    keep: set[int] = {ref.snapshot_id for ref in metadata.refs.values()}
    newest = sorted(snapshots, key=lambda s: (s.timestamp_ms, s.sequence_number), reverse=True)
    keep.update(s.snapshot_id for s in newest[: max(keep_snapshots, 1)])
    keep.update(s.snapshot_id for s in snapshots if s.timestamp_ms >= now_ms - keep_for_ms)
    record = read_record(table, "snapshot expiry")
    for snapshot in _ancestry(snapshots, metadata.current_snapshot_id):
        keep.add(snapshot.snapshot_id)
        if snapshot.snapshot_id == record.snapshot_id:
            break
    if record.since is None or record.since > now_ms - LEGACY_GRACE_MS:
        keep.update(
            s.snapshot_id
            for s in snapshots
            if SUMMARY_BATCH_ID in _extra(s) and SUMMARY_RECORD not in _extra(s)
        )
    expire = frozenset(s.snapshot_id for s in snapshots if s.snapshot_id not in keep)
    return ExpiryPlan(expire=expire, keep=frozenset(keep) - expire)


def expire_snapshots(
    table: Table, plan: ExpiryPlan, *, delete: Callable[[str], None]
) -> tuple[int, int]:
    """Remove `plan.expire` in one commit, then the files nothing else references.

    Returns (snapshots removed, files deleted). The commit fails with
    pyiceberg's `CommitFailedException` when another writer committed
    meanwhile; the caller plans again from the refreshed table.
    """
    if not plan.expire:
        return 0, 0
    gone = [s for s in table.metadata.snapshots if s.snapshot_id in plan.expire]
    ExpireSnapshots(ViewTransaction(table, autocommit=True)).by_ids(sorted(plan.expire)).commit()
    return len(gone), delete_unreachable(table, gone, delete=delete)


def reachable(table: Table) -> tuple[set[str], set[str]]:
    """The manifests, and the data files, that the table's snapshots still read."""
    io = table.io
    live_manifests: set[str] = set()
    live_data: set[str] = set()
    for snapshot in table.metadata.snapshots:
        for manifest in snapshot.manifests(io):
            if manifest.manifest_path in live_manifests:
                continue
            live_manifests.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                if entry.status != ManifestEntryStatus.DELETED:
                    live_data.add(entry.data_file.file_path)
    return live_manifests, live_data


def delete_unreachable(
    table: Table, removed: Iterable[Snapshot], *, delete: Callable[[str], None]
) -> int:
    """Delete the files of `removed` snapshots that the table's remaining snapshots do not reach."""
    io = table.io
    live_manifests, live_data = reachable(table)
    live_lists = {s.manifest_list for s in table.metadata.snapshots}
    doomed: dict[str, None] = {}
    seen: set[str] = set()
    for snapshot in removed:
        for manifest in snapshot.manifests(io):
            path = manifest.manifest_path
            if path in live_manifests or path in seen:
                continue
            seen.add(path)
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                if entry.data_file.file_path not in live_data:
                    doomed[entry.data_file.file_path] = None
            doomed[path] = None
        if snapshot.manifest_list not in live_lists:
            doomed[snapshot.manifest_list] = None
    deleted = 0
    for path in doomed:
        try:
            delete(path)
            deleted += 1
        except FileNotFoundError:
            pass
        except Exception as exc:  # the table is consistent; a file left over is only space
            log.warning("cannot delete %s, which no snapshot references any more: %s", path, exc)
    return deleted


def _extra(snapshot: Any) -> dict[str, Any]:
    return snapshot.summary.additional_properties if snapshot.summary else {}
