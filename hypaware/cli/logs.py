"""Logging for the ``hypaware`` command: ``--log-format text|json`` and ``--log-level``.

Every command takes both options. Text is the default; ``json`` prints one
JSON object per line with the time, level, logger and message, plus every
``extra`` field the library attaches to its records (sink, dataset,
batch_id, rows, bytes...). Records go to stderr.

Every record also passes the command's `SecretRedactor`
(`hypaware.cli.redact`): configured secret values print as ``***``, and
httpx/httpcore stay at WARNING unless ``--log-level debug`` is given.

A command that draws a live line on the terminal (``hypaware export``)
hands it to the handler (`LogSetup.line`): the handler clears the line
before a record and redraws it after, so the two never interleave.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Protocol, TextIO

from hypaware.cli.redact import HTTP_LOGGERS, SecretRedactor, hold_http_loggers

__all__ = [
    "LEVELS",
    "JsonFormatter",
    "LineAwareHandler",
    "LiveLine",
    "add_arguments",
    "configured",
]

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Attributes every LogRecord has; anything else on a record came from `extra`.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class LiveLine(Protocol):
    """A line redrawn in place on a terminal."""

    def clear(self) -> None: ...

    def redraw(self) -> None: ...


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--log-format`` and ``--log-level`` to a command's parser."""
    group = parser.add_argument_group("logging")
    group.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="log records as plain text (default) or one JSON object per line",
    )
    group.add_argument(
        "--log-level",
        choices=LEVELS,
        type=str.upper,
        default=None,
        help="the lowest level logged (default WARNING; INFO with -v where a command has it)",
    )


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message and the record's extras."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[key] = value
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


class LineAwareHandler(logging.StreamHandler[TextIO]):
    """A stderr handler that keeps clear of a live line drawn on the same terminal."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.line: LiveLine | None = None

    def emit(self, record: logging.LogRecord) -> None:
        line = self.line
        if line is not None:
            line.clear()
        super().emit(record)
        if line is not None:
            line.redraw()


@contextlib.contextmanager
def configured(args: argparse.Namespace, *, stream: TextIO | None = None) -> Iterator[None]:
    """Install the command's log handler on the root logger for the length of the block.

    The handler is set on `args.log_handler`, so a command can give it its
    live line, and carries a `SecretRedactor` the config check fills
    (`hypaware.cli.common.checked_config`). It is removed afterwards, and the
    levels of the root and the HTTP loggers are restored.
    """
    fmt = getattr(args, "log_format", "text") or "text"
    level_name = getattr(args, "log_level", None)
    if level_name is None:
        level_name = "INFO" if getattr(args, "verbose", False) else "WARNING"
    handler = LineAwareHandler(stream if stream is not None else sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    handler.addFilter(SecretRedactor())
    root = logging.getLogger()
    old_level = root.level
    # httpx and httpcore log headers at DEBUG: only --log-level debug lets them through.
    held = hold_http_loggers(HTTP_LOGGERS if level_name == "DEBUG" else ())
    root.addHandler(handler)
    root.setLevel(logging.getLevelNamesMapping()[level_name])
    args.log_handler = handler
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        for name, level in held.items():
            logging.getLogger(name).setLevel(level)
        handler.line = None
