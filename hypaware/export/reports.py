"""What an export pass did: `SinkReport` per sink, `RunReport` per `run_once`.

Every failure of a pass is a `Failure` in its report (the reason, how many
partitions it holds, whether retrying can help, the first few ids), and is
also one line of `SinkReport.errors`, so ``"ok": false`` never sits next to
an empty error list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from hypaware.core.types import RetryPartition

__all__ = ["FIRST_IDS", "Failure", "RunReport", "SinkReport", "short_reason", "summarise"]

# How many partition ids a failure summary names before it says "and N more".
FIRST_IDS = 5


@attrs.define
class Failure:
    """One reason some partitions of one dataset were not exported in a pass."""

    dataset: str
    reason: str
    partitions: int
    retryable: bool
    first_ids: list[str] = attrs.field(factory=list)
    parked: int = 0
    #: The destination or configuration is at fault: the sink halts, nothing parks.
    sink_fault: bool = False

    def describe(self) -> str:
        """The failure as one line, naming its dataset."""
        return f"dataset {self.dataset!r}: {self.summary()}"

    def summary(self, sink: str | None = None) -> str:
        """The failure as one line, for a context that already names the dataset (and,
        given `sink`, the sink: the reason's own mention of both is left out)."""
        ids = ", ".join(self.first_ids)
        more = self.partitions - len(self.first_ids)
        if more > 0:
            ids += f" and {more} more"
        if self.sink_fault:
            kind = "the sink's fault, it halts"
        else:
            kind = "retryable" if self.retryable else "not retryable"
        reason = self.reason if sink is None else short_reason(self.reason, sink, self.dataset)
        text = f"{self.partitions} partitions failed ({kind}): {reason} [{ids}]"
        if self.parked:
            text += f"; {self.parked} parked"
        return text


def short_reason(reason: str, sink: str, dataset: str) -> str:
    """`reason` without its leading mention of `sink` and `dataset`, for a log line whose
    prefix names them already. ``sink 'a' (where): ...`` keeps the where."""
    head = f"sink {sink!r}"
    if reason.startswith(head + ": "):
        reason = reason[len(head) + 2 :]
    elif reason.startswith(head + " (") and "): " in reason:
        where, _, rest = reason[len(head) + 2 :].partition("): ")
        reason = f"{where}: {rest}"
    lead = f"dataset {dataset!r}: "
    if reason.startswith(lead):
        reason = reason[len(lead) :]
    return reason


def summarise(dataset: str, retry: Iterable[RetryPartition]) -> list[Failure]:
    """`retry` grouped by reason and kind of fault, in the order the reasons first appear."""
    groups: dict[tuple[str, bool, bool], Failure] = {}
    for r in retry:
        key = (r.reason, r.retryable, r.sink_fault)
        f = groups.get(key)
        if f is None:
            f = groups[key] = Failure(dataset, r.reason, 0, r.retryable, sink_fault=r.sink_fault)
        f.partitions += 1
        if len(f.first_ids) < FIRST_IDS:
            f.first_ids.append(r.partition_id)
    return list(groups.values())


@attrs.define
class SinkReport:
    """What one pass did for one sink.

    `failures` holds every partition failure by reason; `errors` has one
    line per failure and per problem outside any partition (a sink that
    cannot be built, a refused state, a timeout). `parked` counts partitions
    parked in this pass (see docs/export.md); `already_held` the partitions
    the destination acknowledged as written before by the same cache.
    `notices` are warnings that do not fail the pass (the cache changed, a
    stand-in identity); `ledger` accounts, per dataset, for every sealed
    partition and row after the pass (`hypaware.export.accounts`).

    `parked_total` counts every partition of the sink that is parked after
    the pass (parked now or before), and `halted` is the sink's halt
    (`hypaware.export.halts.Halt.as_dict`) when its destination or
    configuration is at fault: either makes the pass not ok.

    `exported` maps each dataset to the partitions this pass exported and
    their rows; `RunReport` uses it to count a cache row once however many
    sinks took it. It is left out of `as_dict`, whose counters say enough.

    `maintenance` is the `MaintenanceReport.as_dict` of a maintenance run
    the driver made after the pass (it was due), else None. Its failures are
    also in `notices`: they do not fail the pass.
    """

    sink: str
    batches: int = 0
    partitions: int = 0
    rows: int = 0
    bytes: int = 0
    files: int = 0
    retried: int = 0
    lost: int = 0
    parked: int = 0
    already_held: int = 0
    lag_partitions: int = 0
    lag_rows: int = 0
    errors: list[str] = attrs.field(factory=list)
    notices: list[str] = attrs.field(factory=list)
    ledger: dict[str, Any] = attrs.field(factory=dict)
    failures: list[Failure] = attrs.field(factory=list)
    seconds: float = 0.0
    parked_total: int = 0
    halted: dict[str, Any] | None = None
    exported: dict[str, dict[str, int]] = attrs.field(factory=dict, repr=False)
    maintenance: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return (
            not self.errors
            and not self.retried
            and not self.failures
            and not self.parked_total
            and self.halted is None
        )

    @property
    def failed_partitions(self) -> int:
        return sum(f.partitions for f in self.failures)

    def add_failures(self, failures: Iterable[Failure]) -> None:
        for f in failures:
            self.failures.append(f)
            self.errors.append(f.describe())

    def add_exported(self, dataset: str, rows: Mapping[str, int]) -> None:
        """Count `rows` (partition id to rows) as exported from `dataset` in this pass."""
        self.partitions += len(rows)
        self.rows += sum(rows.values())
        self.exported.setdefault(dataset, {}).update(rows)

    def as_dict(self) -> dict[str, Any]:
        doc = attrs.asdict(self, filter=lambda a, _: a.name != "exported")
        doc["ok"] = self.ok
        # Milliseconds are what a reader of the JSON can use; the float stays whole here.
        doc["seconds"] = round(self.seconds, 3)
        return doc


@attrs.frozen
class RunReport:
    """What `run_once` did, by sink name."""

    sinks: Mapping[str, SinkReport]

    @property
    def partitions(self) -> int:
        """Partitions exported, summed over sinks: one partition sent to two sinks counts twice."""
        return sum(r.partitions for r in self.sinks.values())

    @property
    def rows(self) -> int:
        """Rows exported, summed over sinks: one row sent to two sinks counts twice."""
        return sum(r.rows for r in self.sinks.values())

    @property
    def cache_partitions(self) -> int:
        """Distinct cache partitions that at least one sink exported in the pass."""
        return len(self._distinct())

    @property
    def cache_rows(self) -> int:
        """Rows of the distinct cache partitions that at least one sink exported."""
        return sum(self._distinct().values())

    def _distinct(self) -> dict[tuple[str, str], int]:
        seen: dict[tuple[str, str], int] = {}
        for r in self.sinks.values():
            for dataset, rows in r.exported.items():
                for pid, n in rows.items():
                    seen[(dataset, pid)] = n
        return seen

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.sinks.values())

    @property
    def errors(self) -> list[str]:
        """Every error of every sink, each prefixed with its sink's name."""
        return [f"sink {name!r}: {e}" for name, r in self.sinks.items() for e in r.errors]
