"""``hypaware status --config FILE``: where each sink stands.

Per sink: the high-water per dataset, the lag (partitions and rows ready in
the cache but not exported to it, respooled and parked ones included), the respool
size, parked partitions with their reasons, batches in flight, the last run,
the last error with when it started and how many partitions it holds, and
warnings: a destination that changed since its progress was recorded, or
progress that was lost. Per dataset, the ledger (every sealed partition in
one bucket: exported, pending, in flight, parked, before the start point)
and the start point; for the whole store, the cache it tracks and every
change of cache it met. Reads only; safe to run while an export is running.
An empty (0-byte) progress store is an error, not "nothing exported".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hypaware.cache.identity import read_identity
from hypaware.cache.local import LocalCache
from hypaware.cli.common import (
    add_config_argument,
    checked_config,
    error,
    errors,
    iso_utc,
    print_table,
)
from hypaware.core.config import HypawareConfig
from hypaware.core.errors import CacheError, ConfigError, StateError
from hypaware.export.accounts import dataset_ledger
from hypaware.export.identity import changes, fingerprint
from hypaware.export.ledger import prior_state
from hypaware.export.state import STATE_FILE, ProgressStore, SinkState

__all__ = ["collect_status", "register", "run", "sink_warnings", "state_warnings"]

# Parked partitions listed one per line in the table view; --json lists them all.
_PARKED_SHOWN = 10


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "status",
        help="show each sink's progress, lag, respool and last error",
        description="Show, per sink: high-water per dataset, lag in partitions and rows, "
        "respool size, batches in flight, last run and last error.",
    )
    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=run)


def _iso(value: Any) -> str | None:
    return iso_utc(value)


def collect_status(config: HypawareConfig) -> dict[str, Any]:
    """The status document for every configured sink (and sinks with leftover progress)."""
    cache = LocalCache.from_config(config)
    state_file = config.state_path / STATE_FILE
    store = ProgressStore(config.state_path, create=False) if state_file.exists() else None
    try:
        # A store tracking another cache: its progress is the old cache's, and the
        # next export starts this one from its beginning (see `_binding`).
        tracked = store.cache_identity() if store is not None else None
        identity = read_identity(cache.path)
        replaced = tracked is not None and identity is not None and identity != tracked
        datasets = {d.name: d for d in cache.datasets()}
        names = [s.name for s in config.sinks]
        if store is not None:
            names += [n for n in store.sinks() if n not in names]
        out: dict[str, Any] = {}
        for name in names:
            configured = any(s.name == name for s in config.sinks)
            state = store.sink_state(name) if store is not None else None
            respooled = store.respooled(name) if store is not None and not replaced else []
            per_dataset: dict[str, Any] = {}
            wanted = None
            if configured:
                wanted = config.sink(name).datasets
            for ds in datasets:
                if wanted is not None and ds not in wanted:
                    continue
                hw = state.high_water.get(ds) if state is not None else None
                entry: dict[str, Any] = {"high_water": hw, "ledger": None, "start": None}
                if store is not None:
                    ledger = dataset_ledger(cache, store, name, ds, replaced=replaced)
                    entry["ledger"] = ledger.as_dict()
                    entry["start"] = ledger.describe_start()
                if hw is None:
                    seen = store is not None and store.seen(name)
                    entry["note"] = (
                        "new dataset: the next pass exports it from its beginning"
                        if seen
                        else "not started: the sink starts after what is sealed when a driver "
                        "first sees it (--backfill sends that too)"
                    )
                    entry["lag_partitions"] = 0
                    entry["lag_rows"] = 0
                else:
                    behind = cache.ready_partitions(ds, after=0 if replaced else hw)
                    again = [r for r in respooled if r.dataset == ds]
                    held = store.parked(name, ds) if store is not None and not replaced else []
                    refs = [cache.partition(ds, r.partition_id) for r in again]
                    refs += [cache.partition(ds, p.partition_id) for p in held]
                    entry["lag_partitions"] = len(behind) + len(again) + len(held)
                    entry["lag_rows"] = sum(p.row_count for p in behind) + sum(
                        r.row_count for r in refs if r is not None
                    )
                    entry["respooled"] = len(again)
                per_dataset[ds] = entry
            doc = _sink_doc(configured, state, per_dataset, respooled)
            parked = store.parked(name) if store is not None else []
            doc["parked"] = len(parked)
            doc["parked_partitions"] = [
                {
                    "dataset": p.dataset,
                    "partition": p.partition_id,
                    "reason": p.reason,
                    "retryable": p.retryable,
                    "attempts": p.attempts,
                    "parked_at": _iso(p.parked_at),
                }
                for p in parked
            ]
            health = store.health(name) if store is not None else None
            doc["failing"] = health is not None and health.error is not None
            doc["error_since"] = _iso(health.error_since) if health else None
            doc["error_partitions"] = health.error_partitions if health else 0
            halt = store.halted(name) if store is not None else None
            doc["halted"] = None if halt is None else halt.as_dict()
            doc["warnings"] = sink_warnings(config, name, store) if configured else []
            out[name] = doc
        return {
            "cache": str(cache.path),
            "state": str(state_file),
            **_binding(cache.path, store),
            "sinks": out,
        }
    finally:
        if store is not None:
            store.close()


def _binding(cache_dir: Path, store: ProgressStore | None) -> dict[str, Any]:
    """The cache's identity, the one the store tracks, the changes met, and a warning."""
    identity = read_identity(cache_dir)
    tracked = store.cache_identity() if store is not None else None
    changes = store.cache_changes() if store is not None else []
    warnings = []
    if identity is not None and tracked is not None and identity != tracked:
        warnings.append(
            f"the cache's identity {identity} is not the one the progress store tracks "
            f"({tracked}): the cache was replaced, and the next export starts it from its "
            "beginning (docs/export.md, The cache's identity)"
        )
    return {
        "cache_identity": identity,
        "state_cache_identity": tracked,
        "cache_changes": [
            {
                "at": _iso(c.at),
                "old_identity": c.old_identity,
                "new_identity": c.new_identity,
                "archived_partitions": c.lost,
                "description": c.describe(),
            }
            for c in changes
        ],
        "warnings": warnings,
    }


def sink_warnings(config: HypawareConfig, name: str, store: ProgressStore | None) -> list[str]:
    """What `hypaware export` would refuse for sink `name`, said before it does."""
    spec = config.sink(name)
    lost = store is None or (name in store.prior_sinks() and not store.has_progress(name))
    if lost:
        evidence = prior_state(config.state_path, name).get(name, [])
        if evidence:
            return [
                f"progress of sink {name!r} is missing although {evidence[0]} shows it exported "
                "before: export will refuse; restore the progress store, or use --backfill or "
                f"`hypaware reset-progress --sink {name}`"
            ]
        return []
    assert store is not None
    known = store.identity(name)
    fp, text = fingerprint(spec)
    if known is not None and known.fingerprint != fp:
        return [
            f"destination of sink {name!r} changed since its progress was recorded "
            f"({changes(known.description, text)}): export will refuse; use --backfill to send "
            f"the retained data there, or `hypaware reset-progress --sink {name}`"
        ]
    return []


def _sink_doc(
    configured: bool, state: SinkState | None, datasets: dict[str, Any], respooled: list[Any]
) -> dict[str, Any]:
    return {
        "configured": configured,
        "datasets": datasets,
        "lag_partitions": sum(d["lag_partitions"] for d in datasets.values()),
        "lag_rows": sum(d["lag_rows"] for d in datasets.values()),
        "respool": len(respooled),
        "respool_reasons": sorted({r.reason for r in respooled}),
        "in_flight": state.in_flight if state else 0,
        "partitions_exported": state.partitions_exported if state else 0,
        "rows_exported": state.rows_exported if state else 0,
        "last_run": _iso(state.last_run_at) if state else None,
        "last_success": _iso(state.last_success_at) if state else None,
        "last_error": state.last_error if state else None,
        "last_error_at": _iso(state.last_error_at) if state else None,
    }


def run(args: argparse.Namespace) -> int:
    checked = checked_config("status", args)
    if isinstance(checked, int):
        return checked
    config, _plans = checked
    try:
        doc = collect_status(config)
    except ConfigError as exc:
        return errors("status", exc)
    except (StateError, CacheError) as exc:
        error("status", exc)
        return 2
    if args.json or not sys.stdout.isatty():
        print(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    rows: list[tuple[str, ...]] = [
        ("SINK", "HIGH-WATER", "LAG", "RESPOOL", "PARKED", "IN FLIGHT", "LAST RUN", "LAST ERROR")
    ]
    for name, s in doc["sinks"].items():
        marks = ", ".join(
            f"{ds}={'-' if d['high_water'] is None else d['high_water']}"
            for ds, d in s["datasets"].items()
        )
        label = name if s["configured"] else f"{name} (not configured)"
        rows.append(
            (
                label,
                marks or "-",
                f"{s['lag_partitions']} partitions, {s['lag_rows']:,} rows",
                str(s["respool"]),
                str(s["parked"]),
                str(s["in_flight"]),
                s["last_run"] or "never",
                _error_cell(s),
            )
        )
    print_table(rows, sys.stdout)
    for change in doc["cache_changes"][-1:]:
        print(f"cache: {change['description']}", file=sys.stdout)
    for warning in doc["warnings"]:
        print(f"warning: {warning}", file=sys.stdout)
    for name, s in doc["sinks"].items():
        for ds, d in s["datasets"].items():
            if d["start"] is not None and d["ledger"]["before_start"]["partitions"]:
                print(f"start: {name} {ds}: {d['start']}", file=sys.stdout)
        shown = s["parked_partitions"][:_PARKED_SHOWN]
        for p in shown:
            print(
                f"parked: {name} {p['dataset']}/{p['partition']} since {p['parked_at']} "
                f"after {p['attempts']} attempts: {p['reason']}",
                file=sys.stdout,
            )
        if s["parked"] > len(shown):
            print(
                f"parked: {name}: {s['parked'] - len(shown)} more (see --json); "
                f"`hypaware retry --sink {name}` puts them back in line",
                file=sys.stdout,
            )
        if s.get("halted"):
            h = s["halted"]
            print(
                f"halted: {name} since {h['since']} ({h['attempts']} tries): {h['reason']}; "
                f"nothing parked, rows wait pending; next try {h['next_try']}",
                file=sys.stdout,
            )
        for warning in s["warnings"]:
            print(f"warning: {warning}", file=sys.stdout)
    return 0


def _error_cell(s: dict[str, Any]) -> str:
    if s["failing"]:
        return f"{s['last_error']} (since {s['error_since']}, {s['error_partitions']} partitions)"
    return s["last_error"] or "-"


def state_warnings(config: HypawareConfig) -> list[str]:
    """What `hypaware export` would refuse, for every configured sink, from the progress store."""
    state_file = config.state_path / STATE_FILE
    try:
        store = ProgressStore(config.state_path, create=False) if state_file.exists() else None
    except StateError as exc:
        return [str(exc)]
    try:
        return [w for spec in config.sinks for w in sink_warnings(config, spec.name, store)]
    finally:
        if store is not None:
            store.close()
