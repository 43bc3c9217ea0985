"""Sink checks of `close()`: idempotent, prompt, aborting waits, and final.

`close()` twice is quick and raises nothing; `close()` during an export
returns promptly and so does the export; an export parked in a backoff wait
returns, reporting retries, soon after `close()`; `export_batch` after
`close()` raises `SinkClosedError`.
"""

from __future__ import annotations

import asyncio
import contextlib

from hypaware.core.contracts import Sink
from hypaware.core.errors import SinkClosedError
from hypaware.core.types import ExportBatch, ExportOptions, ExportResult
from hypaware.testing.conformance.promises import CheckSkipped, ContractViolation, Promise
from hypaware.testing.conformance.sink_harness import (
    SinkHarness,
    _build,
    _check_accounting,
    _close_within,
    _export,
    _healthy_batch,
)

__all__ = [
    "check_close_aborts_wait",
    "check_close_during_export_is_prompt",
    "check_close_is_idempotent",
    "check_export_after_close_raises",
]


async def check_export_after_close_raises(h: SinkHarness) -> None:
    """`export_batch` after `close()` raises `SinkClosedError`."""
    batch = _healthy_batch("conformance_closed", [3])
    sink = await _build(h)
    await _close_within(h, sink, "close()")
    doing = "export_batch after close()"
    try:
        result = await asyncio.wait_for(
            sink.export_batch(batch, ExportOptions(timeout=h.export_timeout)), h.export_timeout
        )
    except SinkClosedError:
        return
    except Exception as exc:
        raise ContractViolation(
            Promise.CLOSED,
            f"{doing} raised {type(exc).__name__}: {exc} instead of SinkClosedError",
        ) from exc
    raise ContractViolation(
        Promise.CLOSED, f"{doing} returned {result!r} instead of raising SinkClosedError"
    )


async def check_close_is_idempotent(h: SinkHarness) -> None:
    """`close()` twice, on a fresh and on a used sink, is quick and raises nothing."""
    fresh = await _build(h)
    await _close_within(h, fresh, "close() of a sink that exported nothing")
    await _close_within(h, fresh, "a second close()")
    used = await _build(h)
    await _export(h, used, _healthy_batch("conformance_close", [5]))
    await _close_within(h, used, "close() after an export")
    await _close_within(h, used, "a second close() after an export")


async def check_close_during_export_is_prompt(h: SinkHarness) -> None:
    """`close()` while a batch is being exported returns promptly, and so does the export."""
    batch = _healthy_batch("conformance_close_race", [400, 400, 400], batch_id="b-race")
    sink = await _build(h)
    task = asyncio.ensure_future(sink.export_batch(batch, ExportOptions(timeout=h.export_timeout)))
    await asyncio.sleep(0)
    await _await_aborted(h, sink, task, batch, "while batch 'b-race' was being exported")


async def check_close_aborts_wait(h: SinkHarness) -> None:
    """An export parked in a backoff wait returns, reporting retries, soon after `close()`."""
    if h.stall is None:
        raise CheckSkipped(
            "the harness has no stall() (a way to make the destination hold an export "
            "in a wait), so aborting a wait cannot be observed"
        )
    batch = _healthy_batch("conformance_stall", [5, 5], batch_id="b-stall")
    async with h.stall():
        sink = await _build(h)
        task = asyncio.ensure_future(
            sink.export_batch(batch, ExportOptions(timeout=h.export_timeout))
        )
        done, _ = await asyncio.wait({task}, timeout=min(0.3, h.close_timeout))
        if done:
            await _close_within(h, sink, "close()")
            raise AssertionError(
                "stall() did not make export_batch wait (it returned "
                f"{task.result()!r}); the harness must hold the destination in backpressure"
            )
        result = await _await_aborted(h, sink, task, batch, "while batch 'b-stall' was waiting")
    if result is None or result.exported:
        raise ContractViolation(
            Promise.CLOSE_PROMPT,
            "an export parked in a wait, aborted by close(), "
            + (
                "raised SinkClosedError instead of returning its partitions for retry"
                if result is None
                else f"reported {list(result.exported)} exported although nothing got through"
            ),
        )


async def _await_aborted(
    h: SinkHarness, sink: Sink, task: asyncio.Future[ExportResult], batch: ExportBatch, when: str
) -> ExportResult | None:
    try:
        await _close_within(h, sink, f"close() called {when}")
    except ContractViolation:
        await _cancel(h, task)
        raise
    done, _ = await asyncio.wait({task}, timeout=h.close_timeout)
    if not done:
        await _cancel(h, task)
        raise ContractViolation(
            Promise.CLOSE_PROMPT,
            f"export_batch did not return within {h.close_timeout:g} s of a close() called {when}",
        )
    try:
        result = task.result()
    except SinkClosedError:
        return None
    except Exception as exc:
        raise ContractViolation(
            Promise.REPORT_NOT_RAISE,
            f"export_batch interrupted by close() {when} raised {type(exc).__name__}: {exc}",
        ) from exc
    _check_accounting(batch, result, f"export_batch interrupted by close() {when}")
    return result


async def _cancel(h: SinkHarness, task: asyncio.Future[ExportResult]) -> None:
    """Cancel an export that broke the contract, and wait for it to unwind.

    The violation is already decided; the wait only keeps the task from
    outliving the check. It gets the harness's own `close_timeout`, not a
    fixed second, so a slow machine does not leave the task behind.
    """
    task.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(task, h.close_timeout)
