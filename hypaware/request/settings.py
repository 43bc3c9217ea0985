"""Config settings shared by the request sinks, and what they build.

Light on purpose (attrs only): plugin modules import it when their manifest
loads. Heavier pieces (tenacity, httpx) are imported by the builders.
"""

from __future__ import annotations

import math
import re
import socket
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.core.errors import ConfigError
from hypaware.core.secrets import Secret

if TYPE_CHECKING:
    from hypaware.core.resolver import BuildContext
    from hypaware.request.backoff import BackoffPolicy
    from hypaware.request.chunking import ChunkLimits
    from hypaware.request.sink import Timeouts

__all__ = ["RequestSinkSettings", "check_header_name", "reveal_headers"]

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def check_header_name(name: str) -> None:
    """`ValueError` unless `name` is a legal HTTP header name."""
    if not _TOKEN.match(name):
        raise ValueError(f"{name!r} is not a valid HTTP header name")


def _positive_number(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{attribute.name} must be a positive number, got {value}")


def _non_negative(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{attribute.name} must be zero or more, got {value}")


def _positive_int(_inst: object, attribute: attrs.Attribute[Any], value: int) -> None:
    if value < 1:
        raise ValueError(f"{attribute.name} must be at least 1, got {value}")


def _ladder(_inst: object, attribute: attrs.Attribute[Any], value: tuple[float, ...]) -> None:
    if not value or any(not math.isfinite(v) or v <= 0 for v in value):
        raise ValueError(f"{attribute.name} must be a non-empty list of positive seconds")


def _headers(_inst: object, attribute: attrs.Attribute[Any], value: Mapping[str, Secret]) -> None:
    for name in value:
        check_header_name(name)


@attrs.frozen(kw_only=True)
class RequestSinkSettings:
    """Settings every request sink has (documented in ``docs/request-sinks.md``).

    - `gateway_id` (str, default: this machine's host name): who is sending;
      part of every chunk id, so keep it stable.
    - `headers` (object of name -> secret string, default none): extra headers
      on every request; values may be ``${ENV}`` references and are never shown.
    - `max_chunk_rows` (default 5,000), `max_chunk_bytes` (default 4 MiB,
      before compression) and `hard_max_chunk_bytes` (default 32 MiB: a
      single row larger than this is refused).
    - `connect_timeout` (default 10 s) and `read_timeout` (default 60 s).
    - `request_deadline` (default 360 s): the most one chunk may take, every
      request and wait included; past it the partition is handed back.
    - `backoff_ladder` (default ``[30, 60, 120, 300]`` s), `backoff_budget`
      (default 300 s of waiting per chunk), `max_attempts` (default 100 per chunk).
    - `allow_insecure_http` (default false): allow ``http://`` to a
      non-loopback host.
    """

    gateway_id: str | None = None
    headers: Mapping[str, Secret] = attrs.field(factory=dict, validator=_headers)
    max_chunk_rows: int = attrs.field(default=5_000, validator=_positive_int)
    max_chunk_bytes: int = attrs.field(default=4 * 1024 * 1024, validator=_positive_int)
    hard_max_chunk_bytes: int = attrs.field(default=32 * 1024 * 1024, validator=_positive_int)
    connect_timeout: float = attrs.field(default=10.0, validator=_positive_number)
    read_timeout: float = attrs.field(default=60.0, validator=_positive_number)
    request_deadline: float = attrs.field(default=360.0, validator=_positive_number)
    backoff_ladder: tuple[float, ...] = attrs.field(
        default=(30.0, 60.0, 120.0, 300.0), validator=_ladder
    )
    backoff_budget: float = attrs.field(default=300.0, validator=_non_negative)
    max_attempts: int = attrs.field(default=100, validator=_positive_int)
    allow_insecure_http: bool = False

    def required_modules(self) -> Iterator[tuple[str, str, str]]:
        """What the chosen options need installed, as (key, module, extra)."""
        return iter(())

    def __attrs_post_init__(self) -> None:
        if self.hard_max_chunk_bytes < self.max_chunk_bytes:
            raise ValueError(
                f"hard_max_chunk_bytes ({self.hard_max_chunk_bytes}) must be at least "
                f"max_chunk_bytes ({self.max_chunk_bytes})"
            )
        if self.gateway_id is not None and not _TOKEN.match(self.gateway_id):
            raise ValueError(
                f"gateway_id {self.gateway_id!r} must be letters, digits and !#$%&'*+.^_`|~-"
            )

    def gateway(self) -> str:
        return self.gateway_id or socket.gethostname() or "localhost"

    def policy(self) -> BackoffPolicy:
        from hypaware.request.backoff import BackoffPolicy

        return BackoffPolicy(
            ladder=self.backoff_ladder, budget=self.backoff_budget, max_attempts=self.max_attempts
        )

    def limits(self) -> ChunkLimits:
        from hypaware.request.chunking import ChunkLimits

        return ChunkLimits(
            max_rows=self.max_chunk_rows,
            max_bytes=self.max_chunk_bytes,
            hard_max_bytes=self.hard_max_chunk_bytes,
        )

    def timeouts(self) -> Timeouts:
        from hypaware.request.sink import Timeouts

        return Timeouts(
            connect=self.connect_timeout, read=self.read_timeout, deadline=self.request_deadline
        )


def reveal_headers(
    headers: Mapping[str, Secret], ctx: BuildContext, reserved: frozenset[str]
) -> dict[str, str]:
    """The extra headers' text; `ConfigError` for a reserved name or a value with a line break."""
    out: dict[str, str] = {}
    for name, secret in headers.items():
        path = f"sinks.{ctx.sink_name}.config.headers.{name}"
        if name.lower() in reserved:
            raise ConfigError.single(path, "this header is set by the sink itself")
        value = ctx.reveal(secret, f"headers.{name}") or ""
        if any(c in value for c in "\r\n\0"):
            raise ConfigError.single(path, "the value contains a line break or NUL")
        out[name] = value
    return out
