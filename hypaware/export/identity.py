"""A sink's identity and the state it left behind: what the driver checks before a pass.

Progress is keyed by sink name. Two things would make that key lie:

- the sink's destination changed under the same name (another bucket, root,
  endpoint or table): its progress says "sent" for data the new place never
  got. A fingerprint of the destination (plugin names and location keys,
  never secrets) is stored with the progress and compared on every pass.
- the progress store was lost (deleted, or truncated to 0 bytes) while the
  sink's other state shows it ran before: starting "fresh" would silently
  skip everything sealed but not yet exported.

Both are refused with a message naming the ways forward; `--backfill` (or
``hypaware reset-progress``) is the operator saying which one they mean.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypaware.core.config import SinkSpec
from hypaware.export.ledger import prior_state
from hypaware.export.state import ProgressStore

__all__ = [
    "LOCATION_KEYS",
    "IdentityCheck",
    "check_sink",
    "fingerprint",
    "reset_progress",
]

log = logging.getLogger("hypaware.export.driver")

# Keys of a sink's config that say where its data goes. Credentials are never among them.
LOCATION_KEYS = (
    "account",
    "bucket",
    "container",
    "root",
    "prefix",
    "endpoint",
    "url",
    "name",
    "namespace",
    "table",
)
# Keys of a nested catalog that say which catalog (and so which table) is meant.
CATALOG_KEYS = ("type", "path", "uri", "warehouse", "name")


def describe_destination(spec: SinkSpec) -> dict[str, str]:
    """The parts of `spec` that name where its data goes, as flat strings."""
    out: dict[str, str] = {}
    for key, value in (
        ("writer", spec.writer),
        ("destination", spec.destination),
        ("plugin", spec.plugin),
    ):
        if value is not None:
            out[key] = str(value)
    config: Mapping[str, Any] = spec.config
    for key in LOCATION_KEYS:
        value = config.get(key)
        if isinstance(value, str | int | float | bool):
            out[key] = str(value)
    catalog = config.get("catalog")
    if isinstance(catalog, Mapping):
        for key in CATALOG_KEYS:
            value = catalog.get(key)
            if isinstance(value, str | int | float | bool):
                out[f"catalog.{key}"] = str(value)
    return out


def fingerprint(spec: SinkSpec) -> tuple[str, str]:
    """The fingerprint of `spec`'s destination and the JSON it was taken of."""
    text = json.dumps(describe_destination(spec), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32], text


def changes(before: str, after: str) -> str:
    """What differs between two destination descriptions, readably."""
    try:
        old: dict[str, str] = json.loads(before)
        new: dict[str, str] = json.loads(after)
    except ValueError:
        return "the destination changed"
    parts = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            parts.append(f"{key}: {old.get(key, '(unset)')!r} -> {new.get(key, '(unset)')!r}")
    return ", ".join(parts) or "the destination changed"


class IdentityCheck:
    """The outcome of `check_sink`: an error to refuse the pass with, or None, and
    whether the sink's progress was reset (a backfill to a new destination)."""

    def __init__(self, error: str | None = None, reset: bool = False) -> None:
        self.error = error
        self.reset = reset


def check_sink(
    store: ProgressStore, spec: SinkSpec, *, backfill: bool, built: bool
) -> IdentityCheck:
    """Compare `spec`'s destination with what `store` recorded, and look for lost progress.

    With `backfill`, a changed destination resets the sink's progress (the
    cache's retained data goes to the new place) and, when the sink is not
    built yet, moves its own state directory aside (nothing is deleted);
    lost progress is rebuilt by exporting from the first partition.
    """
    name = spec.name
    fp, text = fingerprint(spec)
    known = store.identity(name)
    if known is None:
        if name in store.prior_sinks() and not store.has_progress(name):
            evidence = prior_state(store.state_dir, name).get(name, [])
            shown = ", ".join(str(p) for p in evidence[:3]) or "its state files"
            if not backfill:
                return IdentityCheck(
                    f"sink {name!r}: the progress store {store.path} is new or empty, but "
                    f"{shown} shows this sink exported before: its progress was lost. "
                    "Restore the progress store from a backup, or run with --backfill to "
                    "send every retained partition not yet at the sink, or run "
                    f"`hypaware reset-progress --sink {name} --from now|start`"
                )
            log.warning(
                "sink %s: progress store %s was lost; backfilling from the first "
                "retained partition",
                name,
                store.path,
                extra={"sink": name},
            )
        store.record_identity(name, fp, text)
        return IdentityCheck()
    if known.fingerprint == fp:
        return IdentityCheck()
    what = changes(known.description, text)
    if not backfill:
        return IdentityCheck(
            f"sink {name!r}: its destination changed since its progress was recorded "
            f"({what}). Progress is kept per sink name, so nothing would be sent to the new "
            "place. Run with --backfill to send the cache's retained data to the new "
            f"destination, or `hypaware reset-progress --sink {name} --from now|start` to "
            "accept the change"
        )
    store.reset_sink(name, {})
    if not built:
        _move_aside(store.state_dir / "sinks" / name)
    store.record_identity(name, fp, text)
    log.warning(
        "sink %s: destination changed (%s); progress reset, backfilling to the new destination",
        name,
        what,
        extra={"sink": name},
    )
    return IdentityCheck(reset=True)


def _move_aside(path: Path) -> None:
    # The old destination's batch index would claim partitions the new one never got.
    if path.exists():
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        path.rename(path.with_name(f"{path.name}.replaced-{stamp}"))


def reset_progress(store: ProgressStore, spec: SinkSpec, high_waters: dict[str, int]) -> None:
    """Start `spec`'s sink again at `high_waters`, taking its current destination as its own.

    Its respooled, parked and in-flight partitions are forgotten (the cache
    keeps their data); when its destination changed, its own state directory
    is moved aside so the new destination is written afresh.
    """
    fp, text = fingerprint(spec)
    known = store.identity(spec.name)
    store.reset_sink(spec.name, high_waters)
    if known is not None and known.fingerprint != fp:
        _move_aside(store.state_dir / "sinks" / spec.name)
    store.record_identity(spec.name, fp, text)
