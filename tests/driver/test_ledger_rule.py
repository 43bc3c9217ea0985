"""The ledger's bucketing by seq ranges puts each partition where the plain rule does."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st

from hypaware.core.types import PartitionRef
from hypaware.export.accounts import BUCKETS, DatasetLedger, dataset_ledger
from hypaware.export.binding import StartPoint


@attrs.define
class _Named:
    partition_id: str


@attrs.define
class _Flight:
    dataset: str
    partition_ids: list[str]


@attrs.define
class _State:
    """What `dataset_ledger` asks of a progress store."""

    hw: int | None
    point: StartPoint | None
    flying: list[str]
    parked_ids: list[str]
    respooled_ids: list[str]

    def high_water(self, sink: str, dataset: str) -> int | None:
        return self.hw

    def start_point(self, sink: str, dataset: str) -> StartPoint | None:
        return self.point

    def in_flight(self, sink: str) -> list[_Flight]:
        return [_Flight("events", self.flying), _Flight("other", ["x"])]

    def parked(self, sink: str, dataset: str) -> list[_Named]:
        return [_Named(p) for p in self.parked_ids]

    def respooled(self, sink: str, dataset: str) -> list[_Named]:
        return [_Named(p) for p in self.respooled_ids]


def plain_rule(sealed: list[PartitionRef], state: _State) -> dict[str, Any]:
    """Each partition on its own, in the order the buckets take precedence."""
    ledger = DatasetLedger()
    for part in sealed:
        ledger.sealed.add(part.row_count)
        if part.id in state.flying:
            ledger.in_flight.add(part.row_count)
        elif part.id in state.parked_ids:
            ledger.parked.add(part.row_count)
        elif part.id in state.respooled_ids or state.hw is None or part.seq > state.hw:
            ledger.pending.add(part.row_count)
        elif state.point is not None and state.point.before(part.seq):
            ledger.before_start.add(part.row_count)
        else:
            ledger.exported.add(part.row_count)
    return {b: attrs.asdict(getattr(ledger, b)) for b in ("sealed", *BUCKETS)}


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[PartitionRef], _State]:
    seqs = sorted(draw(st.lists(st.integers(1, 40), max_size=25)))
    sealed = [
        PartitionRef(id=f"p{i}", dataset="events", seq=seq, row_count=draw(st.integers(0, 9)))
        for i, seq in enumerate(seqs)
    ]
    ids = [p.id for p in sealed] + ["gone"]
    some = st.lists(st.sampled_from(ids), max_size=5)
    point = None
    if draw(st.booleans()):
        backfill_hw, start_seq = draw(st.integers(-1, 41)), draw(st.integers(-1, 41))
        point = StartPoint(start_seq, backfill_hw, datetime(2026, 1, 1, tzinfo=UTC))
    hw = draw(st.none() | st.integers(-1, 41))
    return sealed, _State(hw, point, draw(some), draw(some), draw(some))


@given(cases())
def test_buckets_by_seq_range_match_the_plain_rule(case: tuple[list[PartitionRef], _State]) -> None:
    sealed, state = case
    got = dataset_ledger(None, state, "s", "events", replaced=False, sealed=sealed)  # type: ignore[arg-type]
    assert {b: attrs.asdict(getattr(got, b)) for b in ("sealed", *BUCKETS)} == plain_rule(
        sealed, state
    )
    assert got.balanced
