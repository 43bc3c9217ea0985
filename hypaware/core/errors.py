"""Exceptions raised by hypaware.

Every exception the library raises on purpose derives from `HypawareError`;
the tree is flat so callers can catch one family without knowing the others::

    HypawareError
    ├── ConfigError          configuration that cannot be loaded or resolved
    ├── PluginError          a plugin that cannot be registered or loaded
    ├── StoreError           a blob store operation failed
    │   ├── NotFoundError        (also a FileNotFoundError)
    │   ├── AlreadyExistsError   (also a FileExistsError)
    │   ├── PermissionDeniedError (also a PermissionError)
    │   ├── TransientStoreError  worth retrying later
    │   └── PathError            a path that would leave the store's root (also a ValueError)
    ├── EncodeError          rows that an encoder cannot write
    ├── FilterError          a malformed filter, or one naming an unknown column (also a ValueError)
    ├── SinkError            a sink failed as a whole
    │   └── SinkClosedError      the sink was used after close()
    ├── StateError           the durable progress store is unusable
    ├── CacheError           the cache cannot be read or written
    └── QueryError           a query that cannot be answered as asked
        ├── UnknownDatasetError   in neither the cache nor the sink (also a LookupError)
        ├── NotQueryableError     the sink named cannot be read back
        ├── QueryInputError       a malformed time, expression or column (also a ValueError)
        └── SourceUnreadableError a part of the data (the cache or a sink) could not be read

Messages never contain secret values: configuration secrets are `Secret`
objects whose text is only revealed to the plugin that uses them.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

__all__ = [
    "AlreadyExistsError",
    "CacheError",
    "ConfigError",
    "EncodeError",
    "FilterError",
    "HypawareError",
    "NotFoundError",
    "NotQueryableError",
    "PathError",
    "PermissionDeniedError",
    "PluginError",
    "Problem",
    "QueryError",
    "QueryInputError",
    "SinkClosedError",
    "SinkError",
    "SourceUnreadableError",
    "StateError",
    "StoreError",
    "TransientStoreError",
    "UnknownDatasetError",
]


class HypawareError(Exception):
    """Root of every error hypaware raises on purpose."""


@attrs.frozen
class Problem:
    """One thing wrong with a configuration.

    `path` is dotted from the top of the config (``sinks.archive.config.bucket``);
    an empty path means the document as a whole.
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(HypawareError):
    """Configuration that cannot be loaded, resolved or built.

    Carries every problem found, not just the first, in `problems`.
    """

    def __init__(self, problems: Iterable[Problem] | str) -> None:
        if isinstance(problems, str):
            problems = [Problem("", problems)]
        self.problems: tuple[Problem, ...] = tuple(problems)
        if not self.problems:
            raise ValueError("ConfigError needs at least one problem")
        super().__init__("\n".join(str(p) for p in self.problems))

    @classmethod
    def single(cls, path: str, message: str) -> ConfigError:
        """A ConfigError with exactly one problem."""
        return cls([Problem(path, message)])


class PluginError(HypawareError):
    """A plugin that cannot be registered, found or loaded."""


class StoreError(HypawareError):
    """A blob store operation failed; `path` names the object when known."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class NotFoundError(StoreError, FileNotFoundError):
    """The object does not exist."""


class AlreadyExistsError(StoreError, FileExistsError):
    """The object exists and the write asked for it not to."""


class PermissionDeniedError(StoreError, PermissionError):
    """The store refused the credentials or the operation."""


class TransientStoreError(StoreError):
    """A failure worth retrying later: timeouts, throttling, unreachable endpoint."""


class PathError(StoreError, ValueError):
    """A path that is malformed or would leave the store's root; refused before any I/O."""


class EncodeError(HypawareError):
    """Rows an encoder cannot write (unsupported type, row over a hard limit)."""


class FilterError(HypawareError, ValueError):
    """A filter that is malformed or does not fit the dataset (unknown column, wrong type)."""


class SinkError(HypawareError):
    """A sink failed as a whole, not for one partition."""


class SinkClosedError(SinkError):
    """The sink was used after `close()`."""


class StateError(HypawareError):
    """The durable progress store is missing, locked or corrupt."""


class CacheError(HypawareError):
    """The cache cannot be read or written (missing, read-only, corrupt, wrong schema)."""


# Defined here, below every room, so that sinks can raise them from the query
# sources they provide (`hypaware.core.query_source`); `hypaware.querying.errors`
# is where users import them from.
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
