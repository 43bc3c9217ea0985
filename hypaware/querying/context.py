"""What one query runs against: the cache, the dataset, the sink chosen to read, its progress.

`_context` takes the `source` given to `hypaware.query` (a config, a config
mapping or file path, or an `ExportDriver`), finds the dataset in the cache,
picks the queryable sink to read (`_pick`) and builds it, and says how to
read what that sink has acknowledged (`hypaware.querying.progress`).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.cache.protocol import Cache, ExportFloor
from hypaware.core.config import HypawareConfig
from hypaware.core.config_loader import load_config
from hypaware.core.errors import CacheError, ConfigError, HypawareError
from hypaware.core.registry import did_you_mean
from hypaware.core.types import DatasetInfo
from hypaware.querying.errors import (
    CacheOnlyWarning,
    NotQueryableError,
    SourceUnreadableError,
    UnknownDatasetError,
)
from hypaware.querying.progress import _open_state, acknowledged
from hypaware.querying.sources import sink_source

if TYPE_CHECKING:
    from hypaware.export.driver import ExportDriver

log = logging.getLogger(__name__)


@attrs.define
class _Context:
    cache: Cache
    dataset: DatasetInfo
    sink_name: str | None
    sink: Any
    read_floor: Any
    cleanup: list[Any]
    # Closed as soon as the plan is made (sqlite connections stay in their thread).
    planning: list[Any] = attrs.field(factory=list)
    partial: bool = False


def _driver_sink(driver: Any, name: str) -> Any:
    """The driver's live sink `name`, built on first use as the driver itself would."""
    return driver.sink(name)


def _as_config(source: Any) -> HypawareConfig:
    if isinstance(source, HypawareConfig):
        return source
    if isinstance(source, Mapping | str | os.PathLike):
        return load_config(source)
    raise TypeError(
        "query takes a HypawareConfig, a config mapping or file path, or an ExportDriver; "
        f"got {type(source).__name__}"
    )


def _pick(
    candidates: Sequence[tuple[str, bool, tuple[str, ...] | None]],
    dataset: str,
    wanted: str | None,
) -> str | None:
    """The sink to read: `wanted` (checked), else the first queryable one receiving `dataset`."""
    names = [n for n, _, _ in candidates]
    if wanted is not None:
        for name, queryable, datasets in candidates:
            if name != wanted:
                continue
            if not queryable:
                raise NotQueryableError(
                    f"sink {wanted!r} is not queryable: its writer/destination pair cannot be "
                    "read back (JSONL files and request sinks never are)"
                )
            if datasets is not None and dataset not in datasets:
                raise NotQueryableError(
                    f"sink {wanted!r} does not receive dataset {dataset!r} "
                    f"(it takes {', '.join(datasets) or 'none'})"
                )
            return name
        raise NotQueryableError(f"no sink named {wanted!r}{did_you_mean(wanted, names)}")
    for name, queryable, datasets in sorted(candidates):
        if queryable and (datasets is None or dataset in datasets):
            return name
    return None


def _dataset(cache: Cache, name: str) -> DatasetInfo:
    try:
        infos = list(cache.datasets())
    except (CacheError, OSError) as exc:
        raise SourceUnreadableError("cache", f"cannot list datasets: {exc}") from exc
    for info in infos:
        if info.name == name:
            return info
    known = [i.name for i in infos]
    raise UnknownDatasetError(
        f"no dataset {name!r} in the cache{did_you_mean(name, known)} "
        f"(datasets: {', '.join(known) or 'none'})"
    )


def _context(
    source: Any,
    dataset: str,
    sink: str | None,
    env: Mapping[str, str] | None,
    allow_partial: bool,
) -> _Context:
    from hypaware.export.driver import ExportDriver

    if isinstance(source, ExportDriver):
        return _driver_context(source, dataset, sink)
    return _config_context(source, dataset, sink, env, allow_partial)


def _driver_context(driver: ExportDriver, dataset: str, sink: str | None) -> _Context:
    """Read through the driver's own cache, progress store and live sinks."""
    info = _dataset(driver.cache, dataset)
    built: dict[str, Any] = {}
    candidates = []
    for name in driver.sink_names:
        try:
            built[name] = _driver_sink(driver, name)
            readable = sink_source(name, built[name]) is not None
        except Exception as exc:  # a sink that cannot be built is no source
            log.warning("sink %s cannot be built for a query: %s", name, exc)
            readable = False
        candidates.append((name, readable, driver.sink_spec(name).datasets))
    chosen = _pick(candidates, dataset, sink)
    state = driver.state
    built_sink = built[chosen] if chosen is not None else None
    return _Context(
        driver.cache,
        info,
        chosen,
        built_sink,
        (lambda: acknowledged(state, chosen, dataset)) if chosen else None,
        [],
    )


def _config_context(
    source: Any,
    dataset: str,
    sink: str | None,
    env: Mapping[str, str] | None,
    allow_partial: bool,
) -> _Context:
    """Open the configured cache and build the chosen sink as an export would."""
    from hypaware.cache.local import LocalCache
    from hypaware.core.registry import Registry
    from hypaware.core.resolver import resolve
    from hypaware.export.build import build

    config = _as_config(source)
    cache = LocalCache.from_config(config)
    info = _dataset(cache, dataset)
    plans = {p.name: p for p in resolve(config, Registry.from_entry_points())}
    candidates = [(p.name, p.queryable, p.spec.datasets) for p in plans.values()]
    chosen = _pick(candidates, dataset, sink)
    if chosen is None:
        return _Context(cache, info, None, None, None, [])
    try:
        built_sink = build(plans[chosen], config=config, env=env)
    except (ConfigError, HypawareError) as exc:
        error = SourceUnreadableError(f"sink {chosen!r}", f"cannot be built: {exc}")
        if not allow_partial:
            raise error from exc
        # Two frames below plan_query (through _context): its stacklevel plus two
        # blames the same frame.
        warnings.warn(
            f"query of {dataset!r} is partial: {error}; reading the cache alone",
            CacheOnlyWarning,
            stacklevel=5,
        )
        return _Context(cache, info, None, None, None, [], partial=True)
    store = _open_state(config)

    def read_floor() -> ExportFloor | None:
        if store is None:
            return None
        return acknowledged(store, chosen, dataset)

    planning = [store] if store is not None else []
    return _Context(cache, info, chosen, built_sink, read_floor, [built_sink], planning)
