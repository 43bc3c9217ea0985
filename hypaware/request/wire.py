"""What a request sink's wire protocol supplies, without any HTTP library.

`hypaware.request.sink.RequestSink` does the HTTP, chunking, backpressure
and lifecycle; a `Wire` says where a dataset's chunks go, which headers a
chunk carries and whether a 2xx answer is a real acknowledgement. The
central and webhook plugins each define one. Keeping this module free of
httpx and tenacity lets plugin modules import it when their manifest loads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import attrs

from hypaware.core.errors import SinkError

if TYPE_CHECKING:
    from hypaware.request.chunking import Chunk, ChunkIdentity, Framing

__all__ = ["PermanentRequestError", "Reply", "Wire", "server_message"]


class PermanentRequestError(SinkError):
    """The endpoint refused a chunk in a way retrying cannot fix (a 4xx, a bad acknowledgement).

    `rows_fault` says the refusal is about the rows themselves (a 400, 413
    or 422): their partition is parked. Otherwise the endpoint or the
    configuration is at fault (credentials, a wrong URL, a redirect, TLS, an
    acknowledgement that is not one): the sink halts and nothing is parked.
    """

    def __init__(self, message: str, *, rows_fault: bool = False) -> None:
        super().__init__(message)
        self.rows_fault = rows_fault


@attrs.frozen
class Reply:
    """An HTTP answer as a `Wire` sees it. `body` is at most the first 64 KiB."""

    status: int
    headers: Mapping[str, str]
    body: bytes = attrs.field(repr=False)


class Wire(Protocol):
    """A request sink's protocol."""

    @property
    def plugin(self) -> str:
        """The plugin's name, for messages (``@hypaware/central``)."""
        ...

    @property
    def framing(self) -> Framing:
        """How rows are laid out in a body: ``ndjson`` or ``json-array``."""
        ...

    @property
    def content_type(self) -> str: ...

    def url(self, dataset: str) -> str:
        """Where the chunks of `dataset` are POSTed."""
        ...

    def headers(self, chunk: Chunk, identity: ChunkIdentity) -> dict[str, str]:
        """The headers of one chunk's request, credentials included; the same on every re-send."""
        ...

    def stamp(self, headers: dict[str, str], chunk: Chunk, now: float) -> dict[str, str]:
        """The `headers` to send on this attempt: what must be fresh each time (a
        timestamped signature) added; `now` is epoch seconds. Most wires return them as
        they are."""
        ...

    def check_ack(self, reply: Reply, chunk: Chunk) -> int:
        """Accept a 2xx `reply` as the chunk's acknowledgement, or raise `PermanentRequestError`.

        Returns how many of the chunk's rows were newly stored (0 for a
        chunk the endpoint had already seen).
        """
        ...


def server_message(body: bytes, limit: int = 300) -> str:
    """A short, printable account of an error body: the ``error.message`` of a JSON body, or text.

    Control characters are dropped and the result is cut to `limit` characters.
    """
    text = ""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        doc = None
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            text = err["message"]
        elif isinstance(err, str):
            text = err
        elif isinstance(doc.get("message"), str):
            text = doc["message"]
    if not text:
        text = body[: limit * 4].decode("utf-8", errors="replace")
    text = "".join(c if c.isprintable() else " " for c in text).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."
