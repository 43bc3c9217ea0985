"""A cache's identity: who made its partitions, unique across machines.

A partition id is unique only within the cache that made it (two caches
both start their seqs at 1), so everything outside the cache names a
partition by (cache identity, dataset, partition id): the progress store
binds itself to one identity, sinks scope every "already written" decision
by it. `LocalCache` keeps its identity in ``<root>/cache-id``, created once,
atomically, the first time it is asked for; a wiped or replaced directory
gets a new one. A copied directory carries the same identity as its origin:
give the copy its own by deleting its ``cache-id`` before it is first used.

The file also says where the identity was made (``made-at <host>:<path>``).
A cache opened on another host or at another path than that (a copy, a
restore elsewhere, or a plain move) logs a WARNING once saying so, since
two live caches with one identity are taken as one by every sink; nothing
else can tell a copy from its origin.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import uuid
from pathlib import Path

from hypaware.core.errors import CacheError

__all__ = ["IDENTITY_FILE", "check_identity", "local_identity", "new_identity", "read_identity"]

IDENTITY_FILE = "cache-id"
_MADE_AT = "made-at "

log = logging.getLogger("hypaware.cache")
# Printable, short, with no separators hypaware uses in names or records.
_IDENTITY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{7,127}")


def new_identity() -> str:
    """A fresh identity: a random UUID (122 random bits, so unique across machines)."""
    return str(uuid.uuid4())


def check_identity(value: object, what: str) -> str:
    """`value` if it is a usable identity, else `CacheError` naming `what`."""
    if not isinstance(value, str) or not _IDENTITY.fullmatch(value):
        raise CacheError(
            f"{what}: {value!r} is not a usable cache identity (8 to 128 characters: letters, "
            "digits, '.', '_', ':' and '-', starting with a letter or digit)"
        )
    return value


def local_identity(root: Path, *, fsync: bool = True) -> str:
    """The identity kept in ``root/cache-id``, made (and `root` created) on first use.

    Two processes making it at once agree: the file appears by a hard link
    that fails when it exists, and the loser reads the winner's.
    """
    path = root / IDENTITY_FILE
    existing = _read(path, warn_moved=True)
    if existing is not None:
        return existing
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f".tmp-{IDENTITY_FILE}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"{new_identity()}\n{_MADE_AT}{_here(root)}\n")
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
        if fsync:
            fd = os.open(root, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    except OSError as exc:
        raise CacheError(f"cannot create the cache identity {path}: {exc}") from exc
    made = _read(path)
    if made is None:
        raise CacheError(f"cache identity {path} vanished while it was made")
    return made


def read_identity(root: Path) -> str | None:
    """The identity kept in ``root/cache-id``, or None when it has not been made (reads only)."""
    return _read(root / IDENTITY_FILE)


def _here(root: Path) -> str:
    return f"{socket.gethostname()}:{root.resolve()}"


def _read(path: Path, *, warn_moved: bool = False) -> str | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CacheError(f"cannot read the cache identity {path}: {exc}") from exc
    lines = text.splitlines() or [""]
    identity = check_identity(lines[0].strip(), f"cache identity file {path}")
    made = next((x[len(_MADE_AT) :] for x in lines[1:] if x.startswith(_MADE_AT)), None)
    if warn_moved and made is not None and made != _here(path.parent):
        log.warning(
            "the cache at %s carries the identity %s made for %s: if this directory is a copy "
            "of another cache that still exports, delete %s so this one gets its own "
            "(sinks take two caches with one identity as one; docs/export.md)",
            path.parent,
            identity,
            made,
            path,
            extra={"cache_identity": identity, "made_at": made},
        )
    return identity
