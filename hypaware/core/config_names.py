"""Rules for names and local paths a config gives: sink names, ``state_dir``, ``cache.path``.

A sink's name becomes a file name (its lock file, its progress rows, an
Iceberg catalog's directory), and the two directories are opened as given,
so what the operating system would refuse later is refused while checking
the config, with the key that holds it.
"""

from __future__ import annotations

import re

__all__ = ["MAX_PATH_BYTES", "MAX_SINK_NAME_BYTES", "local_path_problem", "sink_name_problem"]

# File names are capped at 255 bytes; a sink's lock file adds ".lock" and
# other files add a little more, so its name stays well under that.
MAX_SINK_NAME_BYTES = 200
# Linux PATH_MAX.
MAX_PATH_BYTES = 4096
_SEGMENT_BYTES = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _control(text: str) -> str | None:
    match = _CONTROL.search(text)
    if match is None:
        return None
    what = "a NUL byte" if match.group() == "\x00" else f"a control character ({match.group()!r})"
    return f"contains {what} at position {match.start()}"


def sink_name_problem(name: str) -> str | None:
    """Why `name` cannot name a sink, or None."""
    if not name or name.strip() != name:
        return "sink names must be non-empty, without outer spaces"
    control = _control(name)
    if control is not None:
        return f"sink name {control}; use letters, digits, '-', '_' or '.'"
    if "/" in name:
        return "sink names may not contain '/' (a sink name is a file name)"
    if name in (".", ".."):
        return f"{name!r} is reserved (it names a directory); choose another sink name"
    size = len(name.encode("utf-8"))
    if size > MAX_SINK_NAME_BYTES:
        return f"sink name is {size} bytes long; at most {MAX_SINK_NAME_BYTES} (it names files)"
    return None


def local_path_problem(path: str) -> str | None:
    """Why `path` cannot be a local directory, or None."""
    if not path:
        return "expected a non-empty string (a directory)"
    control = _control(path)
    if control is not None:
        return f"the path {control}"
    size = len(path.encode("utf-8"))
    if size > MAX_PATH_BYTES:
        return f"the path is {size} bytes long; at most {MAX_PATH_BYTES}"
    for segment in path.split("/"):
        if len(segment.encode("utf-8")) > _SEGMENT_BYTES:
            return f"a part of the path is longer than {_SEGMENT_BYTES} bytes: {segment[:40]!r}..."
    return None
