"""The conformance suite: prove that a sink, an encoder or a blob store keeps hypaware's contracts.

Subclass `SinkContract`, `EncoderContract` or `BlobStoreContract` in a test module (the class
name must start with ``Test`` for pytest to collect it) and say how to build
the object under test; every check becomes a test::

    from hypaware.testing.conformance import SinkContract

    class TestMySink(SinkContract):
        def make_sink(self, target):
            return MySink(target / "out")

        def read_rows(self, target, dataset):
            return read_back(target / "out", dataset.name)

`target` is a fixture, by default pytest's ``tmp_path``; override it to hand
the factory anything the destination needs (a server, a bucket). The suite
needs pytest and pytest-asyncio.

The same checks run without pytest through `run_sink_checks` /
`run_store_checks`, which return one `CheckOutcome` per check. A failing
check says which promise was broken, e.g. ``re-exporting batch 'b1'
(attempt 2, same sink) duplicated 10 rows (...): export_batch must be
idempotent per (dataset, partition id), not per batch (...)``.

The names in ``__all__`` here are the suite's public surface. The modules of
this package hold the checks by what they check, and are internal: `sink`
(the sink checks, by name) with `sink_delivery`, `sink_lifecycle`,
`sink_safety` and the `sink_harness` they share; `queryable` with
`queryable_lost_ack` and `scan_rules`; `encoder` with `encoder_contract`;
`store`. `data` is the sample data every check exports, `promises` the
promises a failure names, `runner` how checks run and become tests. The
suite imports none of the loopback servers of `hypaware.testing.servers`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest

from hypaware.core.contracts import BlobStore, Sink
from hypaware.core.types import DatasetInfo, ExportBatch
from hypaware.testing.conformance.data import sample_batch, sample_dataset, sample_partition
from hypaware.testing.conformance.encoder import ENCODER_CHECKS
from hypaware.testing.conformance.encoder_contract import (
    EncoderContract,
    EncoderHarness,
    run_encoder_checks,
)
from hypaware.testing.conformance.promises import (
    CheckSkipped,
    ContractViolation,
    HookMissing,
    Promise,
)
from hypaware.testing.conformance.queryable import QUERYABLE_CHECKS
from hypaware.testing.conformance.runner import CheckOutcome, _as_test, _opted_out, _overrides, _run
from hypaware.testing.conformance.sink import SINK_CHECKS
from hypaware.testing.conformance.sink_harness import SinkHarness
from hypaware.testing.conformance.store import STORE_CHECKS, StoreHarness

__all__ = [
    "ENCODER_CHECK_NAMES",
    "QUERYABLE_CHECK_NAMES",
    "SINK_CHECK_NAMES",
    "STORE_CHECK_NAMES",
    "BlobStoreContract",
    "CheckOutcome",
    "CheckSkipped",
    "ContractViolation",
    "EncoderContract",
    "EncoderHarness",
    "HookMissing",
    "Promise",
    "QueryableSinkContract",
    "SinkContract",
    "SinkHarness",
    "StoreHarness",
    "run_encoder_checks",
    "run_queryable_checks",
    "run_sink_checks",
    "run_store_checks",
]

H = TypeVar("H")

_ALL_SINK_CHECKS = {**SINK_CHECKS, **QUERYABLE_CHECKS}

#: The checks `run_sink_checks` runs, in order (a `SinkContract` test is ``test_<name>``).
SINK_CHECK_NAMES: tuple[str, ...] = tuple(SINK_CHECKS)
#: The checks `run_queryable_checks` adds for a sink that claims ``queryable``.
QUERYABLE_CHECK_NAMES: tuple[str, ...] = tuple(QUERYABLE_CHECKS)
#: The checks `run_encoder_checks` runs.
ENCODER_CHECK_NAMES: tuple[str, ...] = tuple(ENCODER_CHECKS)
#: The checks `run_store_checks` runs.
STORE_CHECK_NAMES: tuple[str, ...] = tuple(STORE_CHECKS)


async def run_sink_checks(
    harness: SinkHarness, only: Iterable[str] | None = None
) -> list[CheckOutcome]:
    """Run the sink checks (all, or those named in `only`) against `harness`.

    A check that breaks a promise is ``failed`` with the promise named; one
    where the object raised something the contract does not cover is
    ``failed`` without a promise. A harness that is itself broken (e.g.
    `read_rows` returns rows without ``row_id``) raises `AssertionError`.
    """
    return await _run(SINK_CHECKS, harness, only, harness.skip_checks, _ALL_SINK_CHECKS)


async def run_queryable_checks(
    harness: SinkHarness, only: Iterable[str] | None = None
) -> list[CheckOutcome]:
    """Run the checks of a sink that claims ``queryable`` (all, or those in `only`).

    These are the five checks in `QUERYABLE_CHECK_NAMES`: the scan is exact
    by value and type, honours `exclude` over every subset, honours the
    projection, honours the filter, and reads a lost ack's rows once. They
    run on top of (not including) `run_sink_checks`' own: a queryable sink
    runs both. Each outcome names its check, so a failure says which rule
    the scan broke.
    """
    return await _run(QUERYABLE_CHECKS, harness, only, harness.skip_checks, _ALL_SINK_CHECKS)


async def run_store_checks(
    harness: StoreHarness, only: Iterable[str] | None = None
) -> list[CheckOutcome]:
    """Run the blob store checks (all, or those named in `only`) against `harness`."""
    return await _run(STORE_CHECKS, harness, only)


class SinkContract:
    """Base class of a sink's conformance tests.

    Implement `make_sink`; implement `read_rows` so rows can be counted (the
    idempotence checks fail without it, unless opted out of in
    `skip_checks`); optionally `stall`, `local_root`, and the class
    attributes `secrets`, `close_timeout`, `skip_checks`.
    """

    #: Checks opted out of, by name, each with the reason (printed with the skip).
    skip_checks: ClassVar[Mapping[str, str]] = {}

    #: Secret values the sink is configured with; none may leak.
    secrets: ClassVar[Sequence[str]] = ()
    #: Seconds `close()` (and an export it interrupts) may take.
    close_timeout: ClassVar[float] = 5.0
    #: Seconds one healthy `export_batch` may take.
    export_timeout: ClassVar[float] = 60.0

    @pytest.fixture
    def target(self, tmp_path: Path) -> Any:
        """What `make_sink` and `read_rows` receive; override to start a server."""
        return tmp_path

    @pytest.fixture
    def contract_dataset(self) -> DatasetInfo:
        """A sample dataset (`hypaware.testing.conformance.data`), for a subclass's extra tests."""
        return sample_dataset("extra")

    @pytest.fixture
    def contract_batch(self, contract_dataset: DatasetInfo) -> ExportBatch:
        """A sample batch of three partitions (10, 5 and 1 rows) of `contract_dataset`."""
        parts = [
            sample_partition(contract_dataset, f"p{n}", rows, seq=n)
            for n, rows in enumerate((10, 5, 1), start=1)
        ]
        return sample_batch(contract_dataset, parts, batch_id="extra-b1")

    def make_sink(self, target: Any) -> Sink | Awaitable[Sink]:
        """A new sink writing to `target`. Every call must reach the same destination."""
        raise NotImplementedError(f"{type(self).__name__} must implement make_sink(target)")

    def read_rows(
        self, target: Any, dataset: DatasetInfo
    ) -> Iterable[Mapping[str, Any]] | Awaitable[Iterable[Mapping[str, Any]]]:
        """Every row of `dataset` at the destination, each with ``row_id`` and ``value``."""
        raise NotImplementedError

    def stall(self, target: Any) -> AbstractAsyncContextManager[Any] | None:
        """A context during which the destination holds exports in a wait, or None.

        None (the default) skips `close_aborts_wait` with a message naming this
        hook; the other checks do not need it.
        """
        return None

    def local_root(self, target: Any) -> Path | None:
        """The directory all local files of the sink live under, if it writes local files."""
        return None

    def harness(self, target: Any) -> SinkHarness:
        """The `SinkHarness` for `target`, built from this class's methods."""
        read_rows = None
        if _overrides(self, SinkContract, "read_rows"):

            def read_rows(dataset: DatasetInfo) -> Any:
                return self.read_rows(target, dataset)

        stall = None
        if _overrides(self, SinkContract, "stall"):

            def stall() -> AbstractAsyncContextManager[Any]:
                cm = self.stall(target)
                if cm is None:
                    raise CheckSkipped("stall() returned None for this target")
                return cm

        return SinkHarness(
            make_sink=lambda: self.make_sink(target),
            read_rows=read_rows,
            stall=stall,
            local_root=self.local_root(target),
            secrets=tuple(self.secrets),
            close_timeout=self.close_timeout,
            export_timeout=self.export_timeout,
            skip_checks=self.skip_checks,
        )

    async def _check(self, name: str, target: Any) -> None:
        _opted_out(_ALL_SINK_CHECKS, self.skip_checks)
        await _as_test(SINK_CHECKS[name], self.harness(target), self.skip_checks)

    @pytest.mark.asyncio
    async def test_exports_every_partition(self, target: Any) -> None:
        await self._check("exports_every_partition", target)

    @pytest.mark.asyncio
    async def test_reexport_is_idempotent(self, target: Any) -> None:
        await self._check("reexport_is_idempotent", target)

    @pytest.mark.asyncio
    async def test_respool_into_new_batch_is_idempotent(self, target: Any) -> None:
        await self._check("respool_into_new_batch_is_idempotent", target)

    @pytest.mark.asyncio
    async def test_aligned_ids_from_two_caches_both_land(self, target: Any) -> None:
        await self._check("aligned_ids_from_two_caches_both_land", target)

    @pytest.mark.asyncio
    async def test_partition_failure_is_reported(self, target: Any) -> None:
        await self._check("partition_failure_is_reported", target)

    @pytest.mark.asyncio
    async def test_export_after_close_raises(self, target: Any) -> None:
        await self._check("export_after_close_raises", target)

    @pytest.mark.asyncio
    async def test_close_is_idempotent(self, target: Any) -> None:
        await self._check("close_is_idempotent", target)

    @pytest.mark.asyncio
    async def test_close_during_export_is_prompt(self, target: Any) -> None:
        await self._check("close_during_export_is_prompt", target)

    @pytest.mark.asyncio
    async def test_close_aborts_wait(self, target: Any) -> None:
        await self._check("close_aborts_wait", target)

    @pytest.mark.asyncio
    async def test_hostile_names_stay_under_root(self, target: Any) -> None:
        await self._check("hostile_names_stay_under_root", target)

    @pytest.mark.asyncio
    async def test_no_secrets_in_reprs(self, target: Any) -> None:
        await self._check("no_secrets_in_reprs", target)


class QueryableSinkContract(SinkContract):
    """A queryable sink's conformance tests: every `SinkContract` check, and exact reads.

    `scan()` returns every committed row once with its exported values and
    exact types, leaves out the partitions in `exclude` (every subset),
    and honours `columns` and `filter`; and `hypaware.query` reads every
    row once after the sink commits a batch whose ack is lost.
    """

    @pytest.mark.asyncio
    async def test_scan_is_exact(self, target: Any) -> None:
        await self._queryable("scan_is_exact", target)

    @pytest.mark.asyncio
    async def test_scan_honours_exclude(self, target: Any) -> None:
        await self._queryable("scan_honours_exclude", target)

    @pytest.mark.asyncio
    async def test_scan_honours_projection(self, target: Any) -> None:
        await self._queryable("scan_honours_projection", target)

    @pytest.mark.asyncio
    async def test_scan_honours_filter(self, target: Any) -> None:
        await self._queryable("scan_honours_filter", target)

    @pytest.mark.asyncio
    async def test_query_after_lost_ack_reads_rows_once(self, target: Any) -> None:
        await self._queryable("query_after_lost_ack_reads_rows_once", target)

    async def _queryable(self, name: str, target: Any) -> None:
        _opted_out(_ALL_SINK_CHECKS, self.skip_checks)
        await _as_test(QUERYABLE_CHECKS[name], self.harness(target), self.skip_checks)


class BlobStoreContract:
    """Base class of a blob store's conformance tests.

    Implement `make_store`; optionally `local_root` and the class attributes
    `secrets` and `close_timeout`.
    """

    secrets: ClassVar[Sequence[str]] = ()
    close_timeout: ClassVar[float] = 5.0

    @pytest.fixture
    def target(self, tmp_path: Path) -> Any:
        """What `make_store` receives; override to start a server."""
        return tmp_path

    def make_store(self, target: Any) -> BlobStore | Awaitable[BlobStore]:
        """A new store rooted in `target`. Every call must reach the same root."""
        raise NotImplementedError(f"{type(self).__name__} must implement make_store(target)")

    def local_root(self, target: Any) -> Path | None:
        """The local directory the store's root maps to, if it is on local disk."""
        return None

    def harness(self, target: Any) -> StoreHarness:
        return StoreHarness(
            make_store=lambda: self.make_store(target),
            local_root=self.local_root(target),
            secrets=tuple(self.secrets),
            close_timeout=self.close_timeout,
        )

    @pytest.mark.asyncio
    async def test_roundtrip(self, target: Any) -> None:
        await _as_test(STORE_CHECKS["roundtrip"], self.harness(target))

    @pytest.mark.asyncio
    async def test_streamed_put(self, target: Any) -> None:
        await _as_test(STORE_CHECKS["streamed_put"], self.harness(target))

    @pytest.mark.asyncio
    async def test_missing_objects(self, target: Any) -> None:
        await _as_test(STORE_CHECKS["missing_objects"], self.harness(target))

    @pytest.mark.asyncio
    async def test_if_absent(self, target: Any) -> None:
        await _as_test(STORE_CHECKS["if_absent"], self.harness(target))

    @pytest.mark.asyncio
    async def test_list_prefix(self, target: Any) -> None:
        await _as_test(STORE_CHECKS["list_prefix"], self.harness(target))

    @pytest.mark.asyncio
    async def test_paths_stay_under_root(self, target: Any) -> None:
        await _as_test(STORE_CHECKS["paths_stay_under_root"], self.harness(target))

    @pytest.mark.asyncio
    async def test_close_is_idempotent(self, target: Any) -> None:
        await _as_test(STORE_CHECKS["close_is_idempotent"], self.harness(target))

    @pytest.mark.asyncio
    async def test_no_secrets_in_reprs(self, target: Any) -> None:
        await _as_test(STORE_CHECKS["no_secrets_in_reprs"], self.harness(target))
