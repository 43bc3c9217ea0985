"""Synchronous entry points refuse to run inside an event loop, all in the same words."""

from __future__ import annotations

import asyncio

__all__ = ["refuse_running_loop"]


def refuse_running_loop(call: str, instead: str, error: type[Exception]) -> None:
    """Raise `error` if an event loop is running in this thread.

    `asyncio.run` cannot nest; the message says which coroutine to await
    instead, e.g. ``query() cannot run inside an event loop: await
    query_async() instead``.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise error(f"{call} cannot run inside an event loop: await {instead} instead")
