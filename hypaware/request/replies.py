"""Reading an HTTP reply for a request sink, and naming what went wrong on the wire.

A reply is judged by its status first. Only a 2xx body carries meaning (an
acknowledgement), so only a 2xx body must decode; for any other status the
body is at most a message for the operator. It is read raw, capped at
`MAX_REPLY` bytes, and decoded on a best-effort basis: a 429 that claims
``Content-Encoding: gzip`` over a plain body is still backpressure, not a
permanent failure.
"""

from __future__ import annotations

import ssl
import zlib
from typing import TYPE_CHECKING

from hypaware.request.wire import PermanentRequestError, Reply

if TYPE_CHECKING:
    import httpx

__all__ = ["MAX_REPLY", "describe", "is_tls_error", "read_reply", "timeout_kind"]

MAX_REPLY = 64 * 1024

# zlib window bits: 16+ reads a gzip wrapper, a plain value zlib, a negative one raw deflate.
_WBITS: dict[str, tuple[int, ...]] = {
    "gzip": (16 + zlib.MAX_WBITS,),
    "x-gzip": (16 + zlib.MAX_WBITS,),
    "deflate": (zlib.MAX_WBITS, -zlib.MAX_WBITS),
}


async def read_reply(resp: httpx.Response, where: str) -> Reply:
    """The status, headers and at most `MAX_REPLY` bytes of the body of `resp`.

    A 2xx body is decoded as its ``Content-Encoding`` says, and one that
    cannot be is a `PermanentRequestError` (an acknowledgement nobody can
    read). Any other body is read raw and decoded if possible, else dropped.
    """
    import httpx

    headers = {k.lower(): v for k, v in resp.headers.items()}
    body = bytearray()
    if 200 <= resp.status_code < 300:
        try:
            async for part in resp.aiter_bytes():
                body += part
                if len(body) >= MAX_REPLY:
                    break
        except httpx.DecodingError as exc:
            raise PermanentRequestError(
                f"POST {where}: the reply could not be decoded ({exc})"
            ) from exc
        return Reply(resp.status_code, headers, bytes(body[:MAX_REPLY]))
    try:
        async for part in resp.aiter_raw():
            body += part
            if len(body) >= MAX_REPLY:
                break
    except httpx.StreamConsumed:
        # A transport that read the body already (httpx.MockTransport) decoded it too.
        return Reply(resp.status_code, headers, resp.content[:MAX_REPLY])
    raw = bytes(body[:MAX_REPLY])
    return Reply(resp.status_code, headers, _best_effort_decode(raw, headers))


def _best_effort_decode(raw: bytes, headers: dict[str, str]) -> bytes:
    """`raw` decoded per its ``Content-Encoding``, or b"" when it cannot be (never raises)."""
    codings = [c.strip().lower() for c in headers.get("content-encoding", "").split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        return raw
    if len(codings) > 1 or codings[0] not in _WBITS:
        return b""
    for wbits in _WBITS[codings[0]]:
        try:
            out = zlib.decompressobj(wbits).decompress(raw, MAX_REPLY)
        except zlib.error:
            continue
        return out
    return b""


def timeout_kind(exc: Exception) -> str:
    name = type(exc).__name__
    return {
        "ConnectTimeout": "timed out connecting",
        "ReadTimeout": "timed out waiting for the reply",
        "WriteTimeout": "timed out sending the request",
        "PoolTimeout": "timed out waiting for a connection",
    }.get(name, "timed out")


_WHAT_FAILED = {
    "ConnectError": "cannot connect",
    "ReadError": "the connection failed while reading the reply",
    "WriteError": "the connection failed while sending the request",
    "RemoteProtocolError": "the endpoint did not answer with valid HTTP",
    "LocalProtocolError": "the request could not be sent as valid HTTP",
    "UnsupportedProtocol": "the URL's scheme is not supported",
}


def describe(exc: BaseException) -> str:
    name = type(exc).__name__
    text = str(exc).strip()
    what = _WHAT_FAILED.get(name)
    detail = f"{name}: {text}" if text else name
    return f"{what} ({detail})" if what else detail


def is_tls_error(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return "SSL" in str(exc) and "CERTIFICATE" in str(exc).upper()
