"""The encoder checks fail broken encoders, naming the promise each one breaks."""

from __future__ import annotations

import csv
import io
from typing import Any

import pyarrow as pa

from hypaware.testing.conformance import (
    CheckOutcome,
    EncoderContract,
    EncoderHarness,
    Promise,
    run_encoder_checks,
)

from .toy_encoders import (
    CarelessOrderEncoder,
    CsvEncoder,
    EarlyRollingEncoder,
    HoardingEncoder,
    LateHoardingEncoder,
    NeverRollsEncoder,
    WrongErrorEncoder,
)


def read_csv(data: bytes) -> list[dict[str, Any]]:
    return list(csv.DictReader(io.StringIO(data.decode())))


def nested() -> tuple[pa.Schema, list[pa.RecordBatch]]:
    schema = pa.schema([pa.field("tags", pa.list_(pa.string()))])
    return schema, [pa.record_batch([pa.array([["a"]])], schema=schema)]


def harness(encoder: type[CsvEncoder], **kw: Any) -> EncoderHarness:
    kw.setdefault("read_file", read_csv)
    kw.setdefault("unrepresentable", nested)
    return EncoderHarness(make_encoder=encoder, reader="csv.DictReader", **kw)


async def outcomes_of(encoder: type[CsvEncoder], **kw: Any) -> dict[str, CheckOutcome]:
    return {o.name: o for o in await run_encoder_checks(harness(encoder, **kw))}


async def test_a_correct_encoder_passes_every_check() -> None:
    outcomes = await outcomes_of(CsvEncoder)
    assert {n: (o.status, o.message) for n, o in outcomes.items() if o.status != "passed"} == {}
    assert len(outcomes) == 5


async def test_an_encoder_that_never_rolls_over_is_caught() -> None:
    outcomes = await outcomes_of(NeverRollsEncoder)
    failure = outcomes["rolls_over_at_target_size"]
    assert failure.status == "failed"
    assert failure.promise is Promise.ENCODER_ROLLOVER
    assert "at a target size of 32768 bytes made 1 file(s)" in failure.message
    assert "must begin a new file once the current one reaches its target size" in failure.message
    assert outcomes["rows_read_back"].status == "passed"


def failing_alone(outcomes: dict[str, CheckOutcome], name: str) -> CheckOutcome:
    """The outcome of check `name`, after asserting that every other check passed."""
    others = {n: (o.status, o.message) for n, o in outcomes.items() if n != name}
    assert {n: v for n, v in others.items() if v[0] != "passed"} == {}
    failure = outcomes[name]
    assert failure.status == "failed"
    return failure


async def test_an_encoder_that_rolls_over_far_too_early_is_caught() -> None:
    failure = failing_alone(await outcomes_of(EarlyRollingEncoder), "rolls_over_at_target_size")
    assert failure.promise is Promise.ENCODER_ROLLOVER
    assert "at a target size of 32768 bytes made " in failure.message
    assert "smallest but the last: " in failure.message
    assert "each but the last must be at least 16384 bytes (rollover_floor)" in failure.message
    assert "and not long before" in failure.message


async def test_a_lower_rollover_floor_lets_smaller_files_pass() -> None:
    (outcome,) = await run_encoder_checks(
        harness(EarlyRollingEncoder, rollover_floor=1024), only=["rolls_over_at_target_size"]
    )
    assert (outcome.status, outcome.message) == ("passed", "")


async def test_an_encoder_holding_its_input_is_caught() -> None:
    failure = (await outcomes_of(HoardingEncoder))["streams_its_input"]
    assert failure.promise is Promise.ENCODER_STREAMS
    assert "while reading file 1 of 40 (target 32768 bytes), 40 of 40 input" in failure.message


async def test_an_encoder_holding_the_rest_of_its_input_after_one_file_is_caught() -> None:
    failure = failing_alone(await outcomes_of(LateHoardingEncoder), "streams_its_input")
    assert failure.promise is Promise.ENCODER_STREAMS
    assert "while reading file 2 of 40 (target 32768 bytes), 40 of 40 input" in failure.message
    assert "streaming, it needed at most 4:" in failure.message
    assert "across every file" in failure.message


async def test_an_encoder_letting_the_next_file_be_taken_early_is_caught() -> None:
    failure = (await outcomes_of(CarelessOrderEncoder))["early_next_file_raises"]
    assert failure.promise is Promise.ENCODER_ORDER
    assert "returned it" in failure.message


async def test_a_plain_error_for_unrepresentable_rows_is_caught() -> None:
    failure = (await outcomes_of(WrongErrorEncoder))["unrepresentable_rows_raise_encode_error"]
    assert failure.promise is Promise.ENCODE_ERROR
    assert "raised ValueError: csv: column 'tags' is nested" in failure.message


async def test_missing_hooks_fail_loudly_unless_opted_out() -> None:
    outcomes = await outcomes_of(CsvEncoder, read_file=None, unrepresentable=None)
    assert outcomes["rows_read_back"].status == "failed"
    assert "needs read_file" in outcomes["rows_read_back"].message
    assert outcomes["unrepresentable_rows_raise_encode_error"].status == "failed"
    opted = await outcomes_of(
        CsvEncoder,
        unrepresentable=None,
        skip_checks={"unrepresentable_rows_raise_encode_error": "CSV holds any flat row"},
    )
    skipped = opted["unrepresentable_rows_raise_encode_error"]
    assert skipped.status == "skipped"
    assert skipped.message.endswith("opted out by the author: CSV holds any flat row")


class TestCsvEncoderContract(EncoderContract):
    """The toy CSV encoder through the pytest face of the suite."""

    reader = "csv.DictReader"

    def make_encoder(self, target_size: int) -> CsvEncoder:
        return CsvEncoder(target_size)

    def read_file(self, data: bytes) -> list[dict[str, Any]]:
        return read_csv(data)

    def unrepresentable(self) -> tuple[pa.Schema, list[pa.RecordBatch]]:
        return nested()
