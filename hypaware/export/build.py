"""`build`: a resolved `SinkPlan` becomes a live sink.

Sits above every sink room: it imports each plugin's factory through its
manifest and, for a blob sink (a `BlobPlan`), composes destination, encoder
and writer into a `BlobSink` or a `TableSink`; a request sink (a
`RequestPlan`) is its plugin's sink.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hypaware.core.config import HypawareConfig
from hypaware.core.contracts import AsyncClosing, ManagedSink, Sink
from hypaware.core.errors import ConfigError, HypawareError, PluginError
from hypaware.core.manifest import TABLE_FORMAT
from hypaware.core.resolver import BlobPlan, BuildContext, Component, RequestPlan, SinkPlan
from hypaware.core.types import ExportBatch, ExportOptions, ExportResult

__all__ = ["build"]


def build(
    plan: SinkPlan,
    *,
    config: HypawareConfig | None = None,
    env: Mapping[str, str] | None = None,
    state_dir: str | os.PathLike[str] | None = None,
) -> ManagedSink:
    """Construct the live sink for `plan`, a `BlobPlan` or a `RequestPlan` from `resolve`.

    Imports the plugins' factories, reads secrets from `env` (default:
    ``os.environ``), and for a blob sink composes destination and writer.
    Raises `ConfigError` (a missing secret) or `PluginError` naming the sink
    and plugin when a factory fails or returns something that is not what its
    kind promises, and `TypeError` when `plan` is neither kind of plan.

    A sink keeps its own state (a blob sink's batch index) under
    ``<state_dir>/sinks/<name>``: `state_dir` defaults to the config's
    state directory, and without a config to ``.hypaware`` in the current
    directory; give the driver's own state directory when embedding, so two
    apps never share one index.

    Returns a `Sink` that is also an async context manager
    (``async with build(plan) as sink:`` closes it). A plugin's sink that is
    not one already (see `hypaware.core.contracts.AsyncClosing`) comes back
    in a thin proxy that forwards every attribute to it.
    """
    return _managed(_build(plan, config=config, env=env, state_dir=state_dir))


def _managed(sink: Sink) -> ManagedSink:
    if isinstance(sink, ManagedSink):
        return sink
    return _Managed(sink)


class _Managed(AsyncClosing):
    """``async with`` for a plugin's sink that lacks it; everything else is the sink's.

    ``isinstance(sink, PluginSink)`` still holds (through `__class__`);
    ``type(sink)`` is this proxy.
    """

    __slots__ = ("_sink",)

    def __init__(self, sink: Sink) -> None:
        self._sink = sink

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        return await self._sink.export_batch(batch, opts)

    async def close(self) -> None:
        await self._sink.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sink, name)

    # isinstance() consults __class__: the plugin's own class checks still hold.
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return type(self._sink)

    def __repr__(self) -> str:
        return repr(self._sink)


def _build(
    plan: SinkPlan,
    *,
    config: HypawareConfig | None,
    env: Mapping[str, str] | None,
    state_dir: str | os.PathLike[str] | None,
) -> Sink:
    if not isinstance(plan, (BlobPlan, RequestPlan)):
        raise TypeError(
            f"build() takes a BlobPlan or a RequestPlan (from resolve), not {type(plan).__name__}"
        )
    ctx = _build_context(plan, config=config, env=env, state_dir=state_dir)
    if isinstance(plan, RequestPlan):
        sink: Sink = _make(ctx, plan.plugin, Sink)
        return sink
    return _compose_blob_sink(plan, ctx)


def _build_context(
    plan: SinkPlan,
    *,
    config: HypawareConfig | None,
    env: Mapping[str, str] | None,
    state_dir: str | os.PathLike[str] | None,
) -> BuildContext:
    base = Path(config.base_dir) if config is not None and config.base_dir else Path.cwd()
    if state_dir is not None:
        state = Path(state_dir)
    else:
        state = config.state_path if config is not None else base / ".hypaware"
    return BuildContext(
        sink_name=plan.name,
        state_dir=state / "sinks" / plan.name,
        base_dir=base,
        env=dict(os.environ) if env is None else dict(env),
    )


def _make(
    ctx: BuildContext, component: Component, expected: type, /, *args: Any, **kwargs: Any
) -> Any:
    """What `component`'s factory builds for the sink, checked to be an `expected`."""
    factory = component.manifest.load_factory()
    try:
        obj = factory(component.config, ctx, *args, **kwargs)
    except ConfigError:
        raise
    except HypawareError as exc:
        raise PluginError(
            f"sink {ctx.sink_name!r}: plugin {component.name} failed to build: {exc}"
        ) from exc
    except Exception as exc:
        raise PluginError(
            f"sink {ctx.sink_name!r}: plugin {component.name} failed to build: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(obj, expected):
        raise PluginError(
            f"sink {ctx.sink_name!r}: factory of plugin {component.name} returned a "
            f"{type(obj).__name__}, which is not a {expected.__name__}"
        )
    return obj


def _compose_blob_sink(plan: BlobPlan, ctx: BuildContext) -> Sink:
    """A `TableSink` for a table format, else a `BlobSink`: destination first, then encoder."""
    from hypaware.core.contracts import BlobStore, Encoder, TableFormat

    store = _make(ctx, plan.destination, BlobStore)
    encoder = _make(ctx, plan.encoder, Encoder)
    if TABLE_FORMAT in plan.writer.manifest.provides:
        from hypaware.blob.table_sink import TableSink

        table = _make(ctx, plan.writer, TableFormat, store=store, encoder=encoder)
        return TableSink(plan.name, table)
    from hypaware.blob.batch_index import INDEX_FILE, BatchIndex
    from hypaware.blob.sink import BlobSink

    return BlobSink(plan.name, store, encoder, BatchIndex(ctx.state_dir / INDEX_FILE))
