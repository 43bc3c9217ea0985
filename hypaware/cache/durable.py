"""Making many files durable at once.

An fsync waits for the disk, not the CPU: issued one after another, hundreds
of them (one per partition of a seal) cost hundreds of journal commits.
Issued from several threads at once, the filesystem folds them into a few
commits. `fsync_all` does that.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from hypaware.core.workers import map_bounded

__all__ = ["IO_WORKERS", "fsync_all", "fsync_file"]

# Enough waiters for the filesystem to batch their journal commits; they use no CPU.
IO_WORKERS = 16


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_all(paths: Sequence[Path]) -> None:
    """Fsync every file of `paths`; returns when all are durable, raises the first error."""
    map_bounded(fsync_file, paths, workers=IO_WORKERS)
