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

On a terminal: one line per sink and dataset with the ledger's rows, then
the lines that need a look (an error, a start point, parked partitions
grouped by reason with a count, a halt), reasons cut short; ``--verbose``
keeps reasons whole and names every parked partition. Piped, or with
``--json``, the whole document.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

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
from hypaware.export.state import STATE_FILE, ProgressStore, RespoolEntry, SinkState

__all__ = ["collect_status", "register", "run", "sink_warnings", "state_warnings"]

# On a terminal a reason is cut to this many characters; --verbose and --json
# keep it whole.
_REASON_SHOWN = 80


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "status",
        help="show each sink's progress, lag, respool and last error",
        description="Show, per sink: high-water per dataset, lag in partitions and rows, "
        "respool size, batches in flight, last run and last error.",
    )
    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="full reasons, and every parked partition by name",
    )
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
            wanted = config.sink(name).datasets if configured else None
            per_dataset = {
                ds: _dataset_entry(cache, store, name, ds, state, respooled, replaced)
                for ds in datasets
                if wanted is None or ds in wanted
            }
            doc = _sink_doc(configured, state, per_dataset, respooled)
            doc.update(_sink_facts(store, name) if store is not None else _no_facts())
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


def _dataset_entry(
    cache: LocalCache,
    store: ProgressStore | None,
    name: str,
    ds: str,
    state: SinkState | None,
    respooled: list[RespoolEntry],
    replaced: bool,
) -> dict[str, Any]:
    """One dataset of one sink: its high-water, ledger, start point and lag."""
    hw = state.high_water.get(ds) if state is not None else None
    entry: dict[str, Any] = {"high_water": hw, "ledger": None, "start": None}
    # One listing for the ledger and the lag, as a pass does.
    sealed = cache.ready_partitions(ds)
    if store is not None:
        ledger = dataset_ledger(cache, store, name, ds, replaced=replaced, sealed=sealed)
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
        return entry
    floor = 0 if replaced else hw
    behind = [p for p in sealed if p.seq > floor]
    again = [r for r in respooled if r.dataset == ds]
    held = store.parked(name, ds) if store is not None and not replaced else []
    refs = [cache.partition(ds, r.partition_id) for r in again]
    refs += [cache.partition(ds, p.partition_id) for p in held]
    entry["lag_partitions"] = len(behind) + len(again) + len(held)
    entry["lag_rows"] = sum(p.row_count for p in behind) + sum(
        r.row_count for r in refs if r is not None
    )
    entry["respooled"] = len(again)
    return entry


def _no_facts() -> dict[str, Any]:
    """A sink without a progress store: nothing parked, failing, halted or maintained."""
    return {
        "parked": 0,
        "parked_partitions": [],
        "failing": False,
        "error_since": None,
        "error_partitions": 0,
        "halted": None,
        "maintenance": None,
    }


def _sink_facts(store: ProgressStore, name: str) -> dict[str, Any]:
    """What the progress store says of a sink beyond its datasets."""
    parked = store.parked(name)
    health = store.health(name)
    halt = store.halted(name)
    kept = store.last_maintenance(name)
    return {
        "parked": len(parked),
        "parked_partitions": [
            {
                "dataset": p.dataset,
                "partition": p.partition_id,
                "reason": p.reason,
                "retryable": p.retryable,
                "attempts": p.attempts,
                "parked_at": _iso(p.parked_at),
            }
            for p in parked
        ],
        "failing": health.error is not None,
        "error_since": _iso(health.error_since),
        "error_partitions": health.error_partitions,
        "halted": None if halt is None else halt.as_dict(),
        "maintenance": None
        if kept is None
        else {
            "at": _iso(kept[0]),
            "ok": bool(kept[1].get("ok", True)),
            "summary": str(kept[1].get("summary", "")),
            "errors": list(kept[1].get("errors", [])),
        },
    }


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
    _print_view(doc, verbose=args.verbose, out=sys.stdout)
    return 0


def _print_view(doc: dict[str, Any], *, verbose: bool, out: TextIO) -> None:
    """The terminal view: one line per sink and dataset, then what needs a look."""
    short = _shortener(verbose)
    print_table(_ledger_rows(doc), out)
    for change in doc["cache_changes"][-1:]:
        print(f"cache: {change['description']}", file=out)
    for warning in doc["warnings"]:
        print(f"warning: {warning}", file=out)
    for name, s in doc["sinks"].items():
        _print_sink_notes(name, s, verbose=verbose, short=short, out=out)


def _shortener(verbose: bool) -> Callable[[str], str]:
    """A reason on one line, cut to `_REASON_SHOWN` characters unless `verbose`."""

    def short(text: str) -> str:
        text = " ".join(text.split())
        if verbose or len(text) <= _REASON_SHOWN:
            return text
        return text[: _REASON_SHOWN - 1] + "…"

    return short


def _ledger_rows(doc: dict[str, Any]) -> list[tuple[str, ...]]:
    """The table: a heading, then the ledger's rows per sink and dataset and the last run."""
    head = ("SINK", "DATASET", "EXPORTED", "PENDING", "IN FLIGHT", "PARKED", "BEFORE START")
    rows: list[tuple[str, ...]] = [(*head, "LAST RUN")]
    for name, s in doc["sinks"].items():
        label = name if s["configured"] else f"{name} (not configured)"
        datasets = s["datasets"] or {"-": None}
        for ds, d in datasets.items():
            ledger = d["ledger"] if d is not None else None

            def rows_in(bucket: str, ledger: Any = ledger) -> str:
                return "-" if ledger is None else f"{ledger[bucket]['rows']:,}"

            rows.append(
                (
                    label,
                    ds,
                    rows_in("exported"),
                    rows_in("pending"),
                    rows_in("in_flight"),
                    rows_in("parked"),
                    rows_in("before_start"),
                    _seconds(s["last_run"]) or "never",
                )
            )
    return rows


def _print_sink_notes(
    name: str,
    s: dict[str, Any],
    *,
    verbose: bool,
    short: Callable[[str], str],
    out: TextIO,
) -> None:
    """What needs a look in one sink: error, start points, parked, halt, upkeep, warnings."""
    if s["failing"] and s["last_error"]:
        print(
            f"error: {name} since {_seconds(s['error_since'])}: {short(s['last_error'])}",
            file=out,
        )
    for ds, d in s["datasets"].items():
        if d["start"] is not None and d["ledger"]["before_start"]["partitions"]:
            print(f"start: {name} {ds}: {d['start']}", file=out)
    _print_parked(name, s["parked_partitions"], verbose=verbose, short=short, out=out)
    if s.get("halted"):
        h = s["halted"]
        print(
            f"halted: {name} since {_seconds(h['since'])} ({h['attempts']} tries): "
            f"{short(h['reason'])}; nothing parked, rows wait pending; "
            f"next try {_seconds(h['next_try'])}",
            file=out,
        )
    kept = s.get("maintenance")
    if kept is not None:
        state = "maintained" if kept["ok"] else "maintenance failed"
        print(f"{state}: {name} at {_seconds(kept['at'])}: {short(kept['summary'])}", file=out)
    for warning in s["warnings"]:
        print(f"warning: {warning}", file=out)


def _print_parked(
    name: str,
    parked: list[dict[str, Any]],
    *,
    verbose: bool,
    short: Callable[[str], str],
    out: TextIO,
) -> None:
    """Parked partitions grouped by dataset and reason, each group once with a count."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for p in parked:
        groups.setdefault((p["dataset"], p["reason"]), []).append(p)
    for (ds, reason), members in groups.items():
        since = min(p["parked_at"] for p in members)
        count = f"{len(members)} partition{'s' if len(members) != 1 else ''}"
        print(f"parked: {name} {ds}: {count} since {_seconds(since)}: {short(reason)}", file=out)
        if verbose:
            for p in members:
                print(f"  {p['partition']} after {p['attempts']} attempts", file=out)
    if parked:
        print(f"parked: `hypaware retry --sink {name}` puts them back in line", file=out)


def _seconds(stamp: str | None) -> str | None:
    """An ISO stamp to whole seconds, for the terminal (JSON keeps it whole)."""
    if stamp is None:
        return None
    head, _, rest = stamp.partition(".")
    return head + "Z" if rest else stamp


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
