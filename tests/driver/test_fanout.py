"""The driver's observer fan-out: every callback reaches every observer that has it."""

from __future__ import annotations

import logging

import pytest

from hypaware.export.fanout import ObserverFanout
from hypaware.export.observer import CountingObserver, ExportObserver, NullObserver


def _callbacks(cls: type) -> set[str]:
    return {name for name in vars(cls) if not name.startswith("_") and callable(vars(cls)[name])}


def test_the_fanout_has_every_callback_an_observer_can_have() -> None:
    assert _callbacks(NullObserver) <= _callbacks(ObserverFanout)
    assert isinstance(ObserverFanout([]), ExportObserver)


class Old:
    """An observer from before most callbacks existed."""

    def __init__(self) -> None:
        self.lags: list[tuple[str, str, int, int]] = []

    def lag(self, sink: str, dataset: str, *, partitions: int, rows: int) -> None:
        self.lags.append((sink, dataset, partitions, rows))


class Raising(NullObserver):
    def lag(self, sink: str, dataset: str, *, partitions: int, rows: int) -> None:
        raise RuntimeError("observer bug")


def test_an_observer_without_a_callback_is_skipped_and_one_that_raises_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    old, counting = Old(), CountingObserver()
    fanout = ObserverFanout([Raising(), old, counting])
    with caplog.at_level(logging.ERROR, "hypaware.export.driver"):
        fanout.lag("s", "events", partitions=2, rows=7)
        fanout.pass_started("s")
        fanout.error("s", "boom")
    assert old.lags == [("s", "events", 2, 7)]
    assert counting.of("s").lag_rows == 7
    assert counting.of("s").errors == 1
    (record,) = caplog.records
    assert "observer" in record.getMessage() and "lag" in record.getMessage()
    assert record.exc_info is not None and "observer bug" in str(record.exc_info[1])
