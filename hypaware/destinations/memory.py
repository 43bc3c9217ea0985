"""``@hypaware/memory``: a destination held in this process's memory.

For tests and embedding: objects vanish with the process. Stores given a
`name` are shared by every sink (and every `shared_store` caller) using that
name, so a host can read back what a sink wrote.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.destinations.remote import valid_prefix

if TYPE_CHECKING:
    from obstore.store import MemoryStore

    from hypaware.blob.store import ObstoreBlobStore
    from hypaware.core.resolver import BuildContext

__all__ = ["PLUGIN", "MemoryConfig", "create", "shared_store"]

PLUGIN = "@hypaware/memory"

_shared: dict[str, Any] = {}
_lock = threading.Lock()


@attrs.frozen(kw_only=True)
class MemoryConfig:
    """Config of ``@hypaware/memory``.

    - `name` (str, default ``""``): share the store with everyone using the
      same name in this process; empty gives the sink a private store.
    - `prefix` (str, default ``""``): root inside the store.
    """

    name: str = ""
    prefix: str = attrs.field(default="", validator=valid_prefix)


def shared_store(name: str) -> MemoryStore:
    """The process-wide obstore `MemoryStore` called `name`, created on first use."""
    from obstore.store import MemoryStore

    with _lock:
        store = _shared.get(name)
        if store is None:
            store = _shared[name] = MemoryStore()
        return store


def create(config: MemoryConfig, ctx: BuildContext) -> ObstoreBlobStore:
    """Build the blob store (a private or named shared in-memory store)."""
    from obstore.store import MemoryStore

    from hypaware.blob.store import ObstoreBlobStore

    store = shared_store(config.name) if config.name else MemoryStore()
    url = f"memory://{config.name}"
    if config.prefix:
        url += f"/{config.prefix.rstrip('/')}"
    return ObstoreBlobStore(
        store,
        prefix=config.prefix,
        label=f"sink {ctx.sink_name!r} ({PLUGIN} {url})",
        url=url,
    )
