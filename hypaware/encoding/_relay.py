"""Bytes out of a native writer while it writes, instead of after.

pyarrow writes a whole row group in one call: every encoded page of it
would sit in the `ChunkSink` until the call returns, next to the row
group's Arrow data. `relayed` runs the call on a helper thread and hands
the pages out as they come, a couple of MiB at a time, so what is held
is the row group plus one hand-off, whatever the row group encodes to.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hypaware.encoding._stream import ChunkSink

__all__ = ["relayed"]


class _ReaderGone(Exception):
    """Raised inside the writer's `write()` when the reader stopped: it ends the native call."""


class _Channel:
    """One item at a time from the writer thread to the reader; either side may leave."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._item: object = None
        self._full = False
        self._closed = False

    def put(self, item: object) -> bool:
        """Wait until the slot is free, then fill it; False if the reader left."""
        with self._cond:
            while self._full and not self._closed:
                self._cond.wait()
            if self._closed:
                return False
            self._item, self._full = item, True
            self._cond.notify_all()
            return True

    def get(self) -> object:
        with self._cond:
            while not self._full:
                self._cond.wait()
            item, self._item, self._full = self._item, None, False
            self._cond.notify_all()
            return item

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class _Ended:
    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def relayed(sink: ChunkSink, write: Callable[[], object], *, name: str) -> Iterator[bytes]:
    """Run `write()` (which writes into `sink`) on a helper thread; yield its bytes as it goes.

    Raises what `write()` raised, after the bytes it wrote before failing.
    A reader that stops early (closing the generator) makes the writer's
    next `write()` raise, then waits for the thread to end: no thread
    outlives the generator.
    """
    channel = _Channel()

    def hand_off() -> None:
        if not channel.put(list(sink.take())):
            raise _ReaderGone

    def run() -> None:
        error: BaseException | None = None
        try:
            write()
        except BaseException as exc:  # handed to the reader, which raises it
            error = exc
        channel.put(_Ended(error))

    sink.relay = hand_off
    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        while True:
            item = channel.get()
            if isinstance(item, _Ended):
                if item.error is not None:
                    raise item.error
                break
            assert isinstance(item, list)
            yield from item
            del item
    finally:
        channel.close()
        thread.join()
        sink.relay = None
    yield from sink.take()
