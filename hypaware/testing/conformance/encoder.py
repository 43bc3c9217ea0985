"""Conformance checks for `hypaware.core.contracts.Encoder`: every check, by name.

Each check takes an `EncoderHarness` and raises `ContractViolation` (naming
the broken promise), `HookMissing` or `CheckSkipped`. The rows an encoder
writes are read back by an independent reader the author names (e.g.
``pyarrow.parquet``, ``json``), never by the encoder itself.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.core.contracts import Encoder
from hypaware.core.errors import EncodeError
from hypaware.testing.conformance.data import expected_rows, sample_dataset, sample_table
from hypaware.testing.conformance.promises import ContractViolation, HookMissing, Promise

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ENCODER_CHECKS", "EncoderCheck", "EncoderHarness"]

FileReader = Callable[[bytes], "Iterable[Mapping[str, Any]] | pa.Table"]
BadInput = Callable[[], "tuple[pa.Schema, Iterable[pa.RecordBatch]]"]


def _str_map(values: Mapping[str, str]) -> dict[str, str]:
    return dict(values)


@attrs.frozen
class EncoderHarness:
    """How the checks reach one encoder under test.

    - `make_encoder`: builds an encoder whose files roll over at
      `target_size` bytes (configure row groups or chunks small enough for
      that size to be reachable).
    - `read_file`: the independent reader: one whole file's bytes to its rows
      (mappings, or a ``pyarrow.Table``); `reader` names it in messages.
    - `unrepresentable`: a schema and batches the encoder cannot write (it
      must raise `EncodeError`), or None.
    - `target_size`: the rollover size the checks use (bytes).
    - `rollover_slack`: how far past `target_size` a file may grow before
      the encoder rolls over (one row group, one chunk); default one target.
      It also bounds streaming: at any point the encoder may hold input worth
      `target_size + rollover_slack` bytes it has not emitted yet.
    - `rollover_floor`: the smallest a file other than the last may be
      (bytes); default half the target. An encoder that rolls over when the
      next chunk would cross the target makes files down to the target minus
      one chunk: lower the floor if its chunks are larger than half the target.
    - `skip_checks`: checks opted out of, by name, each with the reason.
    """

    make_encoder: Callable[[int], Encoder]
    read_file: FileReader | None = None
    reader: str = "the author's reader"
    unrepresentable: BadInput | None = None
    target_size: int = 32 * 1024
    rollover_slack: int | None = None
    rollover_floor: int | None = None
    skip_checks: Mapping[str, str] = attrs.field(factory=dict, converter=_str_map, hash=False)


EncoderCheck = Callable[[EncoderHarness], Awaitable[None]]

_ROWS = 40_000
_BATCH_ROWS = 1_000


class _Counted:
    """The input batches, counting how many the encoder has pulled."""

    def __init__(self, table: pa.Table, batch_rows: int = _BATCH_ROWS) -> None:
        self.batches = table.to_batches(max_chunksize=batch_rows)
        self.pulled = 0

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for batch in self.batches:
            self.pulled += 1
            yield batch


def _build(h: EncoderHarness, target: int) -> Encoder:
    encoder = h.make_encoder(target)
    if not isinstance(encoder, Encoder):
        raise ContractViolation(
            Promise.SHAPE,
            f"make_encoder() returned a {type(encoder).__name__}, which lacks "
            "extension, media_type or encode(schema, batches)",
        )
    return encoder


def _files(encoder: Encoder, schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> list[bytes]:
    return [b"".join(chunks) for chunks in encoder.encode(schema, batches)]


def _rows(h: EncoderHarness, data: bytes) -> list[Mapping[str, Any]]:
    assert h.read_file is not None
    got = h.read_file(data)
    if hasattr(got, "to_pylist"):
        got = got.to_pylist()
    return list(got)


def _need(value: object, check: str, hook: str, what: str) -> None:
    """`HookMissing` unless the harness's `hook` (its `value`) is set."""
    if value is None:
        raise HookMissing(
            f"check {check!r} needs {hook} ({what}), and the harness has none: implement "
            f"it, or opt out by name with skip_checks = {{{check!r}: 'why'}}"
        )


def _check_rows(
    h: EncoderHarness, files: list[bytes], expected: dict[str, int], doing: str
) -> None:
    counts: Counter[str] = Counter()
    for n, data in enumerate(files):
        try:
            rows = _rows(h, data)
        except Exception as exc:
            raise ContractViolation(
                Promise.ENCODER_ROWS,
                f"{doing}: file {n + 1} of {len(files)} ({len(data)} bytes) cannot be read by "
                f"{h.reader}: {type(exc).__name__}: {exc}",
            ) from exc
        for row in rows:
            row_id = str(row["row_id"])
            counts[row_id] += 1
            want = expected.get(row_id)
            if want is not None and row.get("value") is not None and int(row["value"]) != want:
                raise ContractViolation(
                    Promise.ENCODER_ROWS,
                    f"{doing}: row {row_id!r} reads back with value {row['value']!r}, not {want}",
                )
    twice = sorted(r for r, c in counts.items() if c > 1)
    missing = sorted(r for r in expected if r not in counts)
    stray = sorted(r for r in counts if r not in expected)
    for problem, ids in (("twice", twice), ("missing", missing), ("not in the input", stray)):
        if ids:
            raise ContractViolation(
                Promise.ENCODER_ROWS,
                f"{doing}: {len(ids)} row(s) {problem} when read back by {h.reader} "
                f"(e.g. {ids[:3]})",
            )


# ------------------------------------------------------------------- checks


async def check_rows_read_back(h: EncoderHarness) -> None:
    """Every row once, read by an independent reader; an empty input makes no file."""
    _need(h.read_file, "rows_read_back", "read_file", "an independent reader of one file")
    dataset = sample_dataset("encoder_rows")
    encoder = _build(h, 1 << 40)
    table = sample_table(dataset, "p1", 5_000, seq=1)
    doing = f"encoding 5000 rows into {encoder.extension} files"
    files = _files(encoder, dataset.schema, table.to_batches(max_chunksize=700))
    _check_rows(h, files, expected_rows(dataset.name, "p1", 5_000, seq=1), doing)
    nothing: list[list[pa.RecordBatch]] = [[], table.slice(0, 0).to_batches()]
    for empty in nothing:
        made = _files(_build(h, 1 << 40), dataset.schema, empty)
        if made:
            raise ContractViolation(
                Promise.ENCODER_ROWS,
                f"encoding an empty input made {len(made)} file(s); it must make none",
            )


async def check_rolls_over_at_target_size(h: EncoderHarness) -> None:
    """Files end once they reach the target size, not long before; no row is lost at the seams."""
    dataset = sample_dataset("encoder_rollover")
    target = h.target_size
    ceiling = target + _slack(h)
    floor = h.rollover_floor if h.rollover_floor is not None else target // 2
    table = sample_table(dataset, "p1", _ROWS, seq=2)
    encoder = _build(h, target)
    files = _files(encoder, dataset.schema, _Counted(table))
    total = sum(len(f) for f in files)
    if total < 4 * target:
        raise AssertionError(
            f"{_ROWS} rows encode to {total} bytes, too few to see a rollover at "
            f"{target} bytes: give the harness a smaller target_size"
        )
    doing = f"encoding {total} bytes of {encoder.extension} at a target size of {target} bytes"
    sizes = [len(f) for f in files]
    oversized = [s for s in sizes if s > ceiling]
    undersized = sorted(s for s in sizes[:-1] if s < floor)
    if len(files) < 2 or oversized or undersized:
        first = ", ".join(str(s) for s in sizes[:5]) + (", ..." if len(sizes) > 5 else "")
        smallest = ", ".join(str(s) for s in sorted(sizes[:-1])[:3])
        raise ContractViolation(
            Promise.ENCODER_ROLLOVER,
            f"{doing} made {len(files)} file(s) ({first} bytes"
            + (f"; smallest but the last: {smallest}" if smallest else "")
            + (f"; {len(oversized)} over {ceiling}" if oversized else "")
            + (f"; {len(undersized)} under {floor}" if undersized else "")
            + f"); each file may be at most {ceiling} bytes (target + rollover_slack), "
            f"and each but the last must be at least {floor} bytes (rollover_floor)",
        )
    if h.read_file is not None:
        _check_rows(h, files, expected_rows(dataset.name, "p1", _ROWS, seq=2), doing)


# Batches an encoder may have pulled beyond what its held bytes account for:
# the one it is encoding and one looked ahead (to learn whether a next file
# exists, or where the current one ends).
_LOOKAHEAD = 2


async def check_streams_its_input(h: EncoderHarness) -> None:
    """Every file, not only the first, is written while the input is still being pulled.

    After each chunk and at the end of each file, the batches pulled so far
    must not exceed what the bytes emitted so far account for, plus a file's
    worth (target + slack) the encoder may hold unwritten, plus
    `_LOOKAHEAD`. Bytes are turned into batches at this run's own average
    (total bytes / batches), so the bound fits any format's density.
    """
    dataset = sample_dataset("encoder_streaming")
    table = sample_table(dataset, "p1", _ROWS, seq=3)
    source = _Counted(table)
    target = h.target_size
    held = target + _slack(h)
    encoder = _build(h, target)
    # (file number, batches pulled, bytes emitted) at each point observed
    seen: list[tuple[int, int, int]] = []
    emitted = 0
    files = encoder.encode(dataset.schema, source)
    try:
        for number, chunks in enumerate(files, start=1):
            for chunk in chunks:
                emitted += len(chunk)
                seen.append((number, source.pulled, emitted))
            seen.append((number, source.pulled, emitted))
    finally:
        _close(files)
    if not emitted:
        made = f"{seen[-1][0]} empty file(s)" if seen else "no file"
        raise ContractViolation(Promise.ENCODER_ROWS, f"encoding {_ROWS} rows made {made}")
    batches = len(source.batches)
    per_batch = emitted / batches
    count = seen[-1][0]
    # A file holds at most `held` bytes; past that the encoder must be found
    # out, or one that holds the rest of its input after its first file passes.
    if _allowed(held, held, per_batch) >= batches:
        raise AssertionError(
            f"{_ROWS} rows encode to {emitted} bytes, too few to tell streaming from holding "
            f"the input when {held} bytes (target + rollover_slack) may be held: give the "
            "harness a smaller target_size"
        )
    for number, pulled, so_far in seen:
        allowed = _allowed(so_far, held, per_batch)
        if pulled > allowed:
            raise ContractViolation(
                Promise.ENCODER_STREAMS,
                f"while reading file {number} of {count} (target {target} bytes), {pulled} of "
                f"{batches} input batches ({_BATCH_ROWS} rows each) had been pulled with "
                f"{so_far} bytes emitted; streaming, it needed at most {allowed}: the input "
                f"for those bytes and {held} more (target + rollover_slack), at "
                f"{per_batch:.0f} bytes per batch, plus {_LOOKAHEAD} in hand",
            )


def _allowed(emitted: int, held: int, per_batch: float) -> int:
    return math.ceil((emitted + held) / per_batch) + _LOOKAHEAD


def _slack(h: EncoderHarness) -> int:
    return h.rollover_slack if h.rollover_slack is not None else h.target_size


async def check_early_next_file_raises(h: EncoderHarness) -> None:
    """Taking the next file before the current one is read to the end raises."""
    dataset = sample_dataset("encoder_order")
    table = sample_table(dataset, "p1", _ROWS, seq=4)
    files = _build(h, h.target_size).encode(dataset.schema, _Counted(table))
    try:
        it = iter(files)
        first = next(it)
        next(iter(first))  # one chunk of the first file, no more
        try:
            second = next(it)
        except StopIteration:
            second = None
        except Exception:
            return  # refused, as promised
        raise ContractViolation(
            Promise.ENCODER_ORDER,
            "taking the next file while the first was still being read "
            + ("returned it" if second is not None else "ended the files silently"),
        )
    finally:
        _close(files)


async def check_unrepresentable_rows_raise_encode_error(h: EncoderHarness) -> None:
    """Rows the encoder cannot write raise `EncodeError`, not another error or nothing."""
    _need(
        h.unrepresentable,
        "unrepresentable_rows_raise_encode_error",
        "unrepresentable",
        "rows it cannot write",
    )
    assert h.unrepresentable is not None
    schema, batches = h.unrepresentable()
    doing = "encoding the harness's unrepresentable rows"
    try:
        _files(_build(h, 1 << 40), schema, batches)
    except EncodeError:
        return
    except Exception as exc:
        raise ContractViolation(
            Promise.ENCODE_ERROR, f"{doing} raised {type(exc).__name__}: {exc}"
        ) from exc
    raise ContractViolation(Promise.ENCODE_ERROR, f"{doing} raised nothing")


def _close(files: object) -> None:
    close = getattr(files, "close", None)
    if callable(close) and not inspect.iscoroutinefunction(close):
        # Closing an abandoned generator must not hide the verdict.
        with contextlib.suppress(Exception):
            close()


ENCODER_CHECKS: dict[str, EncoderCheck] = {
    "rows_read_back": check_rows_read_back,
    "rolls_over_at_target_size": check_rolls_over_at_target_size,
    "streams_its_input": check_streams_its_input,
    "early_next_file_raises": check_early_next_file_raises,
    "unrepresentable_rows_raise_encode_error": check_unrepresentable_rows_raise_encode_error,
}
