"""The conformance suite fails broken sinks, naming the promise each one breaks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from hypaware.testing.conformance import (
    QUERYABLE_CHECK_NAMES,
    CheckOutcome,
    Promise,
    QueryableSinkContract,
    SinkContract,
    SinkHarness,
    run_queryable_checks,
    run_sink_checks,
)

from .toy_sinks import (
    BatchKeyedSink,
    BlockingCloseSink,
    DatasetOrderSink,
    Destination,
    DuplicatingSink,
    EpochSecondsSink,
    ExcludeIgnoringSink,
    FilterIgnoringSink,
    ForgetfulSink,
    IdKeyedSink,
    LeakyReprSink,
    ListSink,
    NullsAsEmptySink,
    PartlyExcludingSink,
    RaisingSink,
    ReopeningSink,
    ScanListSink,
    ShiftedValueSink,
)

TOKEN = "tok-5ecr3t-value"


def harness(sink_class: type[ListSink], **kw: Any) -> SinkHarness:
    dest = Destination()
    return SinkHarness(
        make_sink=lambda: sink_class(dest, TOKEN),
        read_rows=lambda dataset: dest.rows(dataset.name),
        secrets=(TOKEN,),
        **kw,
    )


def by_name(outcomes: list[CheckOutcome]) -> dict[str, CheckOutcome]:
    return {o.name: o for o in outcomes}


async def test_a_correct_sink_passes_every_check() -> None:
    outcomes = by_name(await run_sink_checks(harness(ListSink)))
    failed = {n: o.message for n, o in outcomes.items() if o.status == "failed"}
    assert failed == {}
    assert outcomes["close_aborts_wait"].status == "skipped"
    assert "stall" in outcomes["close_aborts_wait"].message
    assert {o.status for n, o in outcomes.items() if n != "close_aborts_wait"} == {"passed"}


async def test_duplicating_sink_breaks_idempotence() -> None:
    outcomes = by_name(await run_sink_checks(harness(DuplicatingSink)))
    failure = outcomes["reexport_is_idempotent"]
    assert failure.status == "failed"
    assert failure.promise is Promise.PARTITION_IDEMPOTENT
    assert failure.message.startswith(
        "re-exporting batch 'b1' (attempt 2, same sink) duplicated 17 rows"
    )
    assert "export_batch must be idempotent per (dataset, partition id)" in failure.message
    assert outcomes["exports_every_partition"].status == "passed"


async def test_blocking_close_breaks_promptness() -> None:
    outcomes = by_name(
        await run_sink_checks(
            # Its close() never returns, so a short limit fails it as surely as a long one.
            harness(BlockingCloseSink, close_timeout=0.5),
            only=["close_is_idempotent", "close_during_export_is_prompt"],
        )
    )
    for name in ("close_is_idempotent", "close_during_export_is_prompt"):
        failure = outcomes[name]
        assert failure.status == "failed", name
        assert failure.promise is Promise.CLOSE_PROMPT
        assert "did not return within 0.5 s" in failure.message
        assert "close() must return promptly and abort any in-flight wait" in failure.message


async def test_raising_sink_breaks_report_not_raise() -> None:
    outcomes = by_name(await run_sink_checks(harness(RaisingSink)))
    failure = outcomes["partition_failure_is_reported"]
    assert failure.status == "failed"
    assert failure.promise is Promise.REPORT_NOT_RAISE
    assert "raised OSError: partition 'p2' cannot be read" in failure.message
    assert "never raise it through the export driver" in failure.message


async def test_sink_usable_after_close_is_caught() -> None:
    outcomes = by_name(await run_sink_checks(harness(ReopeningSink)))
    failure = outcomes["export_after_close_raises"]
    assert failure.promise is Promise.CLOSED
    assert "export_batch after close() returned ExportResult(" in failure.message
    assert failure.message.endswith("export_batch after close() must raise SinkClosedError")


async def test_unreported_partition_is_caught() -> None:
    outcomes = by_name(await run_sink_checks(harness(ForgetfulSink)))
    failure = outcomes["exports_every_partition"]
    assert failure.promise is Promise.ACCOUNTED
    assert "did not report partition(s) ['p4']" in failure.message


async def test_secret_in_repr_is_caught() -> None:
    outcomes = by_name(await run_sink_checks(harness(LeakyReprSink)))
    failure = outcomes["no_secrets_in_reprs"]
    assert failure.promise is Promise.SECRETS
    assert "a configured secret appears in repr of the sink" in failure.message


def test_a_broken_sink_fails_under_pytest_with_the_promise_named(tmp_path: Path) -> None:
    """What a sink author sees: pytest fails the contract test and prints the promise."""
    (tmp_path / "test_dup.py").write_text(
        textwrap.dedent(
            """
            from hypaware.testing.conformance import SinkContract
            from tests.conformance.toy_sinks import Destination, DuplicatingSink

            DEST = Destination()

            class TestDuplicating(SinkContract):
                def make_sink(self, target):
                    return DuplicatingSink(DEST)

                def read_rows(self, target, dataset):
                    return DEST.rows(dataset.name)
            """
        )
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "asyncio_mode=strict",
            "-k",
            "reexport_is_idempotent",
            str(tmp_path / "test_dup.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "ContractViolation: re-exporting batch 'b1'" in proc.stdout
    assert "export_batch must be idempotent per (dataset, partition id)" in proc.stdout
    assert "1 failed" in proc.stdout


def test_base_class_is_not_collected_as_a_test() -> None:
    assert not SinkContract.__name__.startswith("Test")
    with pytest.raises(NotImplementedError, match="must implement make_sink"):
        SinkContract().make_sink(None)


async def test_dedupe_per_batch_and_partition_is_caught() -> None:
    """Passes every check that re-sends under the same batch id; a respool doubles its rows."""
    outcomes = by_name(await run_sink_checks(harness(BatchKeyedSink)))
    failure = outcomes["respool_into_new_batch_is_idempotent"]
    assert failure.status == "failed"
    assert failure.promise is Promise.PARTITION_IDEMPOTENT
    assert failure.message.startswith(
        "respooling partitions 'p1' and 'p2' of batch 'b1', whose ack was lost, into a new "
        "batch 'b7-respool' (with new partition 'p3') duplicated 15 rows"
    )
    assert "idempotent per (dataset, partition id), not per batch" in failure.message
    # Every other check passes: only the respool check tells it apart.
    others = {n: o.status for n, o in outcomes.items() if n != failure.name}
    assert set(others.values()) <= {"passed", "skipped"}, others


async def test_dedupe_per_partition_id_alone_is_caught() -> None:
    """Passes every check of one cache; a second cache's aligned ids overwrite the first's rows."""
    outcomes = by_name(await run_sink_checks(harness(IdKeyedSink)))
    failure = outcomes["aligned_ids_from_two_caches_both_land"]
    assert failure.status == "failed"
    assert failure.promise is Promise.CACHE_SCOPED
    assert failure.message.startswith(
        "after exporting batch 'b-gw-b' from cache 'gw-b-0000-cache' (partitions 'p1' and "
        "'p2', the ids and seqs the other cache uses too), 13 row(s) of exported partitions "
        "are not at the destination"
    ), failure.message
    assert "scope every 'already written' decision by ExportBatch.cache_identity" in (
        failure.message
    )
    others = {n: o.status for n, o in outcomes.items() if n != failure.name}
    assert set(others.values()) <= {"passed", "skipped"}, others


async def test_a_check_needing_read_rows_fails_without_it() -> None:
    dest = Destination()
    no_rows = SinkHarness(make_sink=lambda: ListSink(dest))
    outcomes = by_name(await run_sink_checks(no_rows))
    for name in ("reexport_is_idempotent", "respool_into_new_batch_is_idempotent"):
        assert outcomes[name].status == "failed", name
        assert f"check {name!r} needs read_rows" in outcomes[name].message
        assert "skip_checks" in outcomes[name].message


async def test_opting_out_by_name_skips_with_the_reason() -> None:
    dest = Destination()
    reason = "the destination is write-only"
    opted = SinkHarness(
        make_sink=lambda: ListSink(dest),
        skip_checks={
            "reexport_is_idempotent": reason,
            "respool_into_new_batch_is_idempotent": reason,
        },
    )
    outcomes = by_name(await run_sink_checks(opted))
    skipped = outcomes["respool_into_new_batch_is_idempotent"]
    assert skipped.status == "skipped"
    assert skipped.message.endswith(f"opted out by the author: {reason}")
    with pytest.raises(ValueError, match="unknown checks"):
        await run_sink_checks(
            SinkHarness(make_sink=lambda: ListSink(dest), skip_checks={"nope": "x"})
        )
    with pytest.raises(ValueError, match="give the reason"):
        await run_sink_checks(
            SinkHarness(make_sink=lambda: ListSink(dest), skip_checks={"close_is_idempotent": " "})
        )


def test_missing_read_rows_fails_under_pytest_and_an_opt_out_prints_its_reason(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_norows.py").write_text(
        textwrap.dedent(
            """
            from hypaware.testing.conformance import SinkContract
            from tests.conformance.toy_sinks import Destination, ListSink

            class TestNoRows(SinkContract):
                def make_sink(self, target):
                    return ListSink(Destination())

            class TestOptedOut(SinkContract):
                skip_checks = {"reexport_is_idempotent": "rows are write-only here"}

                def make_sink(self, target):
                    return ListSink(Destination())
            """
        )
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "-o",
            "asyncio_mode=strict",
            "-k",
            "reexport_is_idempotent",
            str(tmp_path / "test_norows.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "check 'reexport_is_idempotent' needs read_rows" in proc.stdout
    assert "opted out by the author: rows are write-only here" in proc.stdout
    assert "1 failed, 1 skipped" in proc.stdout


async def test_a_correct_queryable_sink_passes_the_queryable_checks() -> None:
    outcomes = by_name(await run_queryable_checks(harness(ScanListSink)))
    assert {n: o.message for n, o in outcomes.items() if o.status != "passed"} == {}
    assert tuple(outcomes) == QUERYABLE_CHECK_NAMES
    assert set(QUERYABLE_CHECK_NAMES) == {
        "scan_is_exact",
        "scan_honours_exclude",
        "scan_honours_projection",
        "scan_honours_filter",
        "query_after_lost_ack_reads_rows_once",
    }


def failed_only(outcomes: dict[str, CheckOutcome]) -> dict[str, Promise | None]:
    return {n: o.promise for n, o in outcomes.items() if o.status == "failed"}


async def test_a_scan_ignoring_exclude_is_caught_directly_and_through_a_query() -> None:
    outcomes = by_name(await run_queryable_checks(harness(ExcludeIgnoringSink)))
    assert failed_only(outcomes) == {
        "scan_honours_exclude": Promise.SCAN_EXCLUDE,
        "query_after_lost_ack_reads_rows_once": Promise.SCAN_EXCLUDE,
    }
    direct = outcomes["scan_honours_exclude"]
    assert direct.message.startswith("scan(exclude={'p1'}) returned 12 row(s) it should not")
    through = outcomes["query_after_lost_ack_reads_rows_once"]
    assert "ack was lost" in through.message and "returned 36 row(s) twice" in through.message


async def test_a_scan_honouring_only_part_of_exclude_is_caught() -> None:
    outcomes = by_name(await run_queryable_checks(harness(PartlyExcludingSink)))
    assert failed_only(outcomes) == {
        "scan_honours_exclude": Promise.SCAN_EXCLUDE,
        "query_after_lost_ack_reads_rows_once": Promise.SCAN_EXCLUDE,
    }
    # The first subset of two ids: p1 is left out, p2's 7 rows come back.
    assert outcomes["scan_honours_exclude"].message.startswith(
        "scan(exclude={'p1', 'p2'}) returned 7 row(s) it should not"
    ) or outcomes["scan_honours_exclude"].message.startswith(
        "scan(exclude={'p2', 'p1'}) returned 7 row(s) it should not"
    )
    assert "twice" in outcomes["query_after_lost_ack_reads_rows_once"].message


@pytest.mark.parametrize(
    ("sink_class", "column", "failing"),
    [
        (ShiftedValueSink, "'value'", {"scan_is_exact", "scan_honours_projection"}),
        (NullsAsEmptySink, "'key'", {"scan_is_exact", "scan_honours_projection"}),
        (EpochSecondsSink, "'ts' as int64", {"scan_is_exact", "scan_honours_projection"}),
    ],
)
async def test_wrong_values_or_castable_types_are_caught(
    sink_class: type[ListSink], column: str, failing: set[str]
) -> None:
    outcomes = by_name(await run_queryable_checks(harness(sink_class)))
    assert set(failed_only(outcomes)) == failing
    exact = outcomes["scan_is_exact"]
    assert exact.promise is Promise.SCAN_VALUES
    assert column in exact.message
    assert outcomes["scan_honours_projection"].promise is Promise.SCAN_PROJECTION


async def test_a_scan_ignoring_its_filter_is_named_by_the_filter_rule() -> None:
    outcomes = by_name(await run_queryable_checks(harness(FilterIgnoringSink)))
    assert failed_only(outcomes) == {"scan_honours_filter": Promise.SCAN_FILTER}
    assert outcomes["scan_honours_filter"].message.startswith("scan(filter=col('value') >= ")


async def test_columns_in_the_wrong_order_are_caught() -> None:
    outcomes = by_name(await run_queryable_checks(harness(DatasetOrderSink)))
    assert failed_only(outcomes) == {"scan_honours_projection": Promise.SCAN_PROJECTION}
    assert "returned columns ['row_id', 'value']" in outcomes["scan_honours_projection"].message


async def test_a_sink_whose_scan_takes_no_exclude_is_not_queryable() -> None:
    class NoExclude(ScanListSink):
        def scan(self, dataset: Any, *, columns: Any = None, filter: Any = None) -> Any:  # type: ignore[override]
            return super().scan(dataset, columns=columns, filter=filter)

    outcomes = by_name(
        await run_queryable_checks(
            harness(NoExclude), only=["query_after_lost_ack_reads_rows_once"]
        )
    )
    failure = outcomes["query_after_lost_ack_reads_rows_once"]
    assert failure.status == "failed"
    assert "takes no 'exclude' keyword" in failure.message


class TestScanListSinkContract(QueryableSinkContract):
    """The toy queryable sink through the pytest face of the suite: every check."""

    @pytest.fixture
    def target(self) -> Destination:
        return Destination()

    def make_sink(self, target: Destination) -> ScanListSink:
        return ScanListSink(target)

    def read_rows(self, target: Destination, dataset: Any) -> list[dict[str, Any]]:
        return target.rows(dataset.name)
