"""Errors a query raises, all `QueryError`s (a `HypawareError`)::

QueryError
├── UnknownDatasetError   the dataset is in neither the cache nor the sink (also a LookupError)
├── NotQueryableError     the sink named cannot be read back
├── QueryInputError       a malformed time, expression or column (also a ValueError)
└── SourceUnreadableError a part of the data (the cache or a sink) could not be read
"""

from __future__ import annotations

from hypaware.core.errors import HypawareError

__all__ = [
    "CacheOnlyWarning",
    "NotQueryableError",
    "QueryError",
    "QueryInputError",
    "SourceUnreadableError",
    "UnknownDatasetError",
]


class QueryError(HypawareError):
    """A query that cannot be answered as asked."""


class UnknownDatasetError(QueryError, LookupError):
    """The dataset is in neither the cache nor the sink queried."""


class NotQueryableError(QueryError):
    """The sink named is not queryable (or does not exist)."""


class QueryInputError(QueryError, ValueError):
    """A malformed time, filter expression, column or key."""


class SourceUnreadableError(QueryError):
    """One part of the data could not be read; `part` names it (``cache``, ``sink 'x'``)."""

    def __init__(self, part: str, message: str) -> None:
        super().__init__(f"{part}: {message}" if not message.startswith(part) else message)
        self.part = part


class CacheOnlyWarning(UserWarning):
    """The answer comes from the cache alone: older rows, bounded by retention, may be missing."""
