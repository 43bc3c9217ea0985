"""Small CSV encoders for testing the encoder checks themselves.

`CsvEncoder` keeps every promise; each subclass breaks exactly one, the way
a real encoder gets it wrong.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator

import pyarrow as pa

from hypaware import EncodeError


class CsvEncoder:
    """Flat columns as CSV with a header; a new file once `target` bytes are written."""

    extension = "csv"
    media_type = "text/csv"

    def __init__(self, target: int) -> None:
        self.target = target

    def _check(self, schema: pa.Schema) -> None:
        for field in schema:
            if pa.types.is_nested(field.type):
                raise EncodeError(f"csv: column {field.name!r} is nested ({field.type})")

    def _lines(self, batch: pa.RecordBatch) -> bytes:
        out = io.StringIO()
        csv.writer(out).writerows(zip(*(c.to_pylist() for c in batch.columns), strict=True))
        return out.getvalue().encode()

    def _header(self, schema: pa.Schema) -> bytes:
        out = io.StringIO()
        csv.writer(out).writerow(schema.names)
        return out.getvalue().encode()

    def encode(
        self, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
    ) -> Iterator[Iterator[bytes]]:
        self._check(schema)
        source = iter(batches)
        pending = next(source, None)
        while pending is not None:
            state: dict[str, object] = {}
            yield self._file(schema, pending, source, state)
            if "next" not in state:
                raise EncodeError("csv: the previous file was not read to the end")
            pending = state["next"]  # type: ignore[assignment]

    def _file(
        self,
        schema: pa.Schema,
        first: pa.RecordBatch,
        source: Iterator[pa.RecordBatch],
        state: dict[str, object],
    ) -> Iterator[bytes]:
        written = 0
        batch: pa.RecordBatch | None = first
        header = self._header(schema)
        yield header
        written += len(header)
        while batch is not None:
            data = self._lines(batch)
            yield data
            written += len(data)
            batch = next(source, None)
            if self.rolls() and written >= self.target:
                break
        state["next"] = batch

    def rolls(self) -> bool:
        return True


class NeverRollsEncoder(CsvEncoder):
    """Ignores its target size: one file, however large."""

    def rolls(self) -> bool:
        return False


class HoardingEncoder(CsvEncoder):
    """Reads the whole input before writing a byte."""

    def encode(
        self, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
    ) -> Iterator[Iterator[bytes]]:
        return super().encode(schema, list(batches))


class LateHoardingEncoder(CsvEncoder):
    """Streams its first file, then reads the rest of the input before the second."""

    def encode(
        self, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
    ) -> Iterator[Iterator[bytes]]:
        rest = _Hoardable(batches)
        for file in super().encode(schema, rest):
            yield file
            rest.hoard()


class _Hoardable(Iterator[pa.RecordBatch]):
    """Batches pulled one by one until `hoard()` takes all that are left at once."""

    def __init__(self, batches: Iterable[pa.RecordBatch]) -> None:
        self._it: Iterator[pa.RecordBatch] = iter(batches)
        self._hoarded = False

    def hoard(self) -> None:
        if not self._hoarded:
            self._it = iter(list(self._it))
            self._hoarded = True

    def __next__(self) -> pa.RecordBatch:
        return next(self._it)


class EarlyRollingEncoder(CsvEncoder):
    """Rolls over at a tenth of its target: many files, each far smaller than it."""

    def __init__(self, target: int) -> None:
        super().__init__(max(1, target // 10))

    def encode(
        self, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
    ) -> Iterator[Iterator[bytes]]:
        # Cut finer than the input's batches, each larger than a tenth of the
        # target: otherwise every file would still end a whole batch long.
        slices = (b.slice(i, 20) for b in batches for i in range(0, b.num_rows, 20))
        return super().encode(schema, slices)


class CarelessOrderEncoder(CsvEncoder):
    """Lets the next file be taken while the current one is half read."""

    def encode(
        self, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
    ) -> Iterator[Iterator[bytes]]:
        self._check(schema)
        source = iter(batches)
        while True:
            first = next(source, None)
            if first is None:
                return
            yield self._file(schema, first, source, {})


class WrongErrorEncoder(CsvEncoder):
    """Refuses nested columns with a plain ValueError."""

    def _check(self, schema: pa.Schema) -> None:
        try:
            super()._check(schema)
        except EncodeError as exc:
            raise ValueError(str(exc)) from None
