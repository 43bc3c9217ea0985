"""`EncoderContract`: an encoder's conformance tests, as `SinkContract` is a sink's.

Subclass it in a test module (the class name must start with ``Test``)::

    import pyarrow.parquet as pq

    class TestMyEncoder(EncoderContract):
        reader = "pyarrow.parquet"

        def make_encoder(self, target_size):
            return MyEncoder(target_file_size=target_size, row_group_size=1000)

        def read_file(self, data):
            return pq.read_table(pa.BufferReader(data))

        def unrepresentable(self):
            ...  # a schema and batches the encoder must refuse with EncodeError

`run_encoder_checks` runs the same checks without pytest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from hypaware.core.contracts import Encoder
from hypaware.testing.conformance.encoder import ENCODER_CHECKS, EncoderHarness
from hypaware.testing.conformance.runner import CheckOutcome, _as_test, _opted_out, _overrides, _run

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["EncoderContract", "EncoderHarness", "run_encoder_checks"]


async def run_encoder_checks(
    harness: EncoderHarness, only: Iterable[str] | None = None
) -> list[CheckOutcome]:
    """Run the encoder checks (all, or those named in `only`) against `harness`."""
    return await _run(ENCODER_CHECKS, harness, only, harness.skip_checks)


class EncoderContract:
    """Base class of an encoder's conformance tests.

    Implement `make_encoder` and `read_file` (an independent reader, named in
    `reader`), and `unrepresentable`; a check whose hook is missing fails
    unless named in `skip_checks` with the reason.
    """

    #: The independent reader `read_file` uses, for messages.
    reader: ClassVar[str] = "the author's reader"
    #: The rollover size the checks use, in bytes.
    target_size: ClassVar[int] = 32 * 1024
    #: How far past the target a file may grow before it rolls over (None: one target).
    rollover_slack: ClassVar[int | None] = None
    #: The smallest a file other than the last may be, in bytes (None: half the target).
    rollover_floor: ClassVar[int | None] = None
    #: Checks opted out of, by name, each with the reason (printed with the skip).
    skip_checks: ClassVar[Mapping[str, str]] = {}

    def make_encoder(self, target_size: int) -> Encoder:
        """A new encoder whose files roll over at `target_size` bytes."""
        raise NotImplementedError(f"{type(self).__name__} must implement make_encoder(target_size)")

    def read_file(self, data: bytes) -> Iterable[Mapping[str, Any]] | pa.Table:
        """One whole file's rows, read by a reader independent of the encoder."""
        raise NotImplementedError

    def unrepresentable(self) -> tuple[pa.Schema, Iterable[pa.RecordBatch]]:
        """A schema and batches the encoder cannot write (it must raise `EncodeError`)."""
        raise NotImplementedError

    def harness(self) -> EncoderHarness:
        """The `EncoderHarness` built from this class's methods."""
        return EncoderHarness(
            make_encoder=self.make_encoder,
            read_file=self.read_file if _overrides(self, EncoderContract, "read_file") else None,
            reader=self.reader,
            unrepresentable=(
                self.unrepresentable
                if _overrides(self, EncoderContract, "unrepresentable")
                else None
            ),
            target_size=self.target_size,
            rollover_slack=self.rollover_slack,
            rollover_floor=self.rollover_floor,
            skip_checks=self.skip_checks,
        )

    async def _check(self, name: str) -> None:
        _opted_out(ENCODER_CHECKS, self.skip_checks)
        await _as_test(ENCODER_CHECKS[name], self.harness(), self.skip_checks)

    @pytest.mark.asyncio
    async def test_rows_read_back(self) -> None:
        await self._check("rows_read_back")

    @pytest.mark.asyncio
    async def test_rolls_over_at_target_size(self) -> None:
        await self._check("rolls_over_at_target_size")

    @pytest.mark.asyncio
    async def test_streams_its_input(self) -> None:
        await self._check("streams_its_input")

    @pytest.mark.asyncio
    async def test_early_next_file_raises(self) -> None:
        await self._check("early_next_file_raises")

    @pytest.mark.asyncio
    async def test_unrepresentable_rows_raise_encode_error(self) -> None:
        await self._check("unrepresentable_rows_raise_encode_error")
