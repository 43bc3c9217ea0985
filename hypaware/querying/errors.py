"""Errors a query raises, all `QueryError`s (a `HypawareError`)::

QueryError
├── UnknownDatasetError   the dataset is in neither the cache nor the sink (also a LookupError)
├── NotQueryableError     the sink named cannot be read back
├── QueryInputError       a malformed time, expression or column (also a ValueError)
└── SourceUnreadableError a part of the data (the cache or a sink) could not be read

They are defined in `hypaware.core.errors`, with every other error; the
warning `CacheOnlyWarning` is defined here.
"""

from __future__ import annotations

from hypaware.core.errors import (
    NotQueryableError,
    QueryError,
    QueryInputError,
    SourceUnreadableError,
    UnknownDatasetError,
)

__all__ = [
    "CacheOnlyWarning",
    "NotQueryableError",
    "QueryError",
    "QueryInputError",
    "SourceUnreadableError",
    "UnknownDatasetError",
]


class CacheOnlyWarning(UserWarning):
    """The answer comes from the cache alone: older rows, bounded by retention, may be missing."""
