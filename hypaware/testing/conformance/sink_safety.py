"""Sink checks that a sink stays in its place: its paths and its secrets.

Dataset names and partition ids that look like paths never escape the
sink's root, and the configured secrets appear in no repr, str, error
message or log record.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypaware.core.types import ExportOptions
from hypaware.testing.conformance.data import sample_batch, sample_dataset, sample_partition
from hypaware.testing.conformance.promises import CheckSkipped, ContractViolation, Promise
from hypaware.testing.conformance.sink_delivery import _check_landed, _expected
from hypaware.testing.conformance.sink_harness import (
    SinkHarness,
    _build,
    _close_within,
    _closing,
    _export,
    _healthy_batch,
)

__all__ = ["check_hostile_names_stay_under_root", "check_no_secrets_in_reprs"]


def _files_under(root: Path) -> set[Path]:
    if not root.exists():
        return set()
    return set(root.rglob("*"))


async def check_hostile_names_stay_under_root(h: SinkHarness) -> None:
    """Dataset names and partition ids that look like paths never escape the sink's root."""
    dataset = sample_dataset("../escape/ds")
    ids = ["../../p1", "a/b", "..", "x\\y", "ü p"]
    parts = [sample_partition(dataset, pid, 3, seq=n) for n, pid in enumerate(ids, start=1)]
    batch = sample_batch(dataset, parts, batch_id="../b-hostile")
    warm = _healthy_batch("conformance_warmup", [2], batch_id="b-warm")
    async with _closing(h, await _build(h)) as sink:
        await _export(h, sink, warm)  # lets a sink create its state before the snapshot
        watch = h.local_root.resolve().parent if h.local_root is not None else None
        before = _files_under(watch) if watch is not None else set()
        doing = f"exporting dataset {dataset.name!r} with partition ids like {ids[0]!r}"
        result = await _export(h, sink, batch, doing=doing)
        if watch is not None and h.local_root is not None:
            root = h.local_root.resolve()
            escaped = sorted(
                str(p)
                for p in _files_under(watch) - before
                if p != root and root not in p.resolve().parents
            )
            if escaped:
                raise ContractViolation(
                    Promise.PATHS,
                    f"{doing} wrote {escaped[:3]} outside the sink's root {str(root)!r}",
                )
        if h.read_rows is not None:
            await _check_landed(h, dataset, _expected(batch, result.exported), doing=doing)


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.texts.append(record.getMessage())
        except Exception:
            self.texts.append(str(record.msg))
        if record.exc_info and record.exc_info[1] is not None:
            self.texts.append(str(record.exc_info[1]))


@contextlib.contextmanager
def _capture_logs() -> Iterator[_Capture]:
    root = logging.getLogger()
    handler = _Capture()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _object_texts(obj: object) -> list[str]:
    texts = [repr(obj), str(obj)]
    fields: dict[str, Any] = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if hasattr(obj, slot):
                fields[slot] = getattr(obj, slot)
    for value in fields.values():
        # Plain strings (or collections of them) may legitimately hold the
        # revealed secret, e.g. to scrub it from messages; objects (configs,
        # clients, stores) must not show it in their repr.
        if not _plain_text(value):
            with contextlib.suppress(Exception):
                texts.append(repr(value))
    return texts


def _plain_text(value: object) -> bool:
    if isinstance(value, str | bytes):
        return True
    if isinstance(value, tuple | list | set | frozenset):
        return all(isinstance(v, str | bytes) for v in value)
    return False


async def check_no_secrets_in_reprs(h: SinkHarness) -> None:
    """The configured secrets appear in no repr, str, error message or log record."""
    secrets = [s for s in h.secrets if s]
    if not secrets:
        raise CheckSkipped("the harness declares no secrets to look for")
    texts: list[tuple[str, str]] = []
    dataset = sample_dataset("conformance_secrets")
    batch = sample_batch(
        dataset,
        [
            sample_partition(dataset, "p1", 4, seq=1),
            sample_partition(dataset, "p2", 4, fail_after=0),
        ],
        batch_id="b-secrets",
    )
    with _capture_logs() as logs:
        sink = await _build(h)
        texts.extend(("repr of the sink or its attributes", t) for t in _object_texts(sink))
        result = await _export(h, sink, batch)
        texts.extend(("a retry reason", r.reason) for r in result.retry_partitions)
        texts.append(("the export result", repr(result)))
        await _close_within(h, sink, "close()")
        try:
            await sink.export_batch(batch, ExportOptions())
        except Exception as exc:
            texts.append(("the error of export_batch after close()", str(exc)))
        texts.extend(("repr of the closed sink", t) for t in _object_texts(sink))
    texts.extend(("a log record", t) for t in logs.texts)
    for where, text in texts:
        for secret in secrets:
            if secret in text:
                raise ContractViolation(
                    Promise.SECRETS, f"a configured secret appears in {where}: {text[:200]!r}"
                )
