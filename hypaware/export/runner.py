"""A sink as the driver holds it, how ready partitions are cut into batches, and two helpers.

`SinkRunner` builds its sink on first use and serialises its passes;
`group_batches` bounds batches by the sink's row and byte limits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hypaware.core.config import SinkSpec
from hypaware.core.types import PartitionRef

if TYPE_CHECKING:
    from hypaware.core.contracts import Sink

__all__ = ["SinkRunner", "call_on_loop", "describe_error", "group_batches"]


def group_batches(
    parts: Sequence[PartitionRef], max_rows: int, max_bytes: int
) -> list[list[PartitionRef]]:
    """Split `parts` (kept in order) into runs within `max_rows` and `max_bytes`.

    A partition larger than a limit on its own makes a batch of one.
    """
    groups: list[list[PartitionRef]] = []
    current: list[PartitionRef] = []
    rows = size = 0
    for part in parts:
        if current and (rows + part.row_count > max_rows or size + part.byte_size > max_bytes):
            groups.append(current)
            current, rows, size = [], 0, 0
        current.append(part)
        rows += part.row_count
        size += part.byte_size
    if current:
        groups.append(current)
    return groups


class SinkRunner:
    """One sink: its settings, the live sink (built on first use), and its pass lock."""

    def __init__(self, spec: SinkSpec, source: Any) -> None:
        self.spec = spec
        self.name = spec.name
        self._factory: Callable[[], Sink] | None = None
        self.sink: Sink | None = None
        if callable(source) and not hasattr(source, "export_batch"):
            self._factory = source
        else:
            self.sink = source
        self.busy = asyncio.Lock()

    def build(self) -> Sink:
        if self.sink is None:
            assert self._factory is not None
            self.sink = self._factory()
        return self.sink


def describe_error(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def call_on_loop(loop: asyncio.AbstractEventLoop, call: Callable[[], None]) -> None:
    """Run `call` on `loop`: now when already there, else handed over (sinks retry in
    worker threads too, and observers are promised the driver's loop)."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        call()
        return
    with contextlib.suppress(RuntimeError):  # the loop is gone: nobody to tell
        loop.call_soon_threadsafe(call)
