"""Config pieces shared by the network object-store destinations (S3, GCS, Azure).

Kept free of obstore imports: manifests import this module when the registry
loads, and that must stay cheap.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import attrs

from hypaware.core.config import FieldValueError, positive
from hypaware.core.errors import ConfigError, PathError
from hypaware.core.paths import check_prefix

if TYPE_CHECKING:
    from hypaware.blob.store import ObstoreBlobStore
    from hypaware.core.resolver import BuildContext

__all__ = [
    "RemoteOptions",
    "check_endpoint",
    "construct_store",
    "is_loopback_host",
    "make_blob_store",
    "valid_prefix",
]


def is_loopback_host(host: str) -> bool:
    """True for ``localhost``, 127.0.0.0/8 and ``::1``."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_endpoint(endpoint: str | None, allow_http: bool, field: str = "endpoint") -> None:
    """Refuse a malformed endpoint, or plain HTTP to a non-loopback host without `allow_http`.

    Raises `FieldValueError` naming `field` (reported as a `ConfigError` at
    the field's path by the resolver).
    """
    if endpoint is None:
        return
    try:
        parts = urlsplit(endpoint)
        host = parts.hostname
        parts.port  # noqa: B018 (parses the port, raising on garbage)
    except ValueError as exc:
        raise FieldValueError(field, f"is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not host:
        raise FieldValueError(
            field, f"must be an http:// or https:// URL with a host, got {endpoint!r}"
        )
    if parts.username is not None or parts.password is not None:
        raise FieldValueError(
            field, "must not carry credentials; use the credential fields instead"
        )
    if parts.scheme == "http" and not allow_http and not is_loopback_host(host):
        raise FieldValueError(
            field,
            f"plain-HTTP endpoint to non-loopback host {host!r} is refused: "
            "use https://, or set allow_http: true to send data unencrypted",
        )


def valid_prefix(_inst: object, attribute: attrs.Attribute[Any], value: str) -> None:
    """attrs validator: a root prefix inside the bucket, checked like a path."""
    try:
        check_prefix(value)
    except PathError as exc:
        raise FieldValueError(attribute.name, str(exc)) from None


def _non_negative(_inst: object, attribute: attrs.Attribute[Any], value: int) -> None:
    if value < 0:
        raise FieldValueError(attribute.name, f"must be 0 or more, got {value}")


@attrs.frozen(kw_only=True)
class RemoteOptions:
    """Keys every network destination accepts.

    - `prefix` (str, default ``""``): root inside the bucket/container;
      every object is written below it.
    - `endpoint` (str URL, default: the provider's public endpoint): a
      custom or emulator endpoint.
    - `allow_http` (bool, default false): permit a plain ``http://``
      endpoint on a non-loopback host. Loopback hosts never need it.
    - `max_retries` (int, default 10), `retry_timeout` (seconds, default
      180): retries of one request with exponential backoff, within the timeout.
    - `connect_timeout` (seconds, default 5) and `timeout` (seconds, default
      30): per connection attempt and per request.
    """

    prefix: str = attrs.field(default="", validator=valid_prefix)
    endpoint: str | None = attrs.field(default=None)
    allow_http: bool = False
    max_retries: int = attrs.field(default=10, validator=_non_negative)
    retry_timeout: float = attrs.field(default=180.0, validator=positive)
    connect_timeout: float = attrs.field(default=5.0, validator=positive)
    timeout: float = attrs.field(default=30.0, validator=positive)

    @endpoint.validator
    def _check_endpoint(self, attribute: attrs.Attribute[Any], value: str | None) -> None:
        # attrs runs validators after every field is set, so allow_http is known here.
        check_endpoint(value, self.allow_http, attribute.name)

    def client_options(self) -> dict[str, Any]:
        return {
            "allow_http": self.endpoint is not None and self.endpoint.startswith("http://"),
            "connect_timeout": timedelta(seconds=self.connect_timeout),
            "timeout": timedelta(seconds=self.timeout),
        }

    def retry_config(self) -> dict[str, Any]:
        return {
            "max_retries": self.max_retries,
            "retry_timeout": timedelta(seconds=self.retry_timeout),
        }


def construct_store(
    build: Callable[[], Any], *, plugin: str, ctx: BuildContext, secrets: Iterable[str | None]
) -> Any:
    """Call an obstore store constructor; its failures become a `ConfigError` without secrets.

    Constructors make no request, so what fails here is configuration
    (an unreadable key file, a malformed key).
    """
    try:
        return build()
    except Exception as exc:
        text = str(exc).split("\n\nDebug source:", 1)[0].splitlines()[0][:300]
        for secret in secrets:
            if secret:
                text = text.replace(secret, "***")
        raise ConfigError.single(
            f"sinks.{ctx.sink_name}.config", f"{plugin} cannot be configured: {text}"
        ) from exc


def make_blob_store(
    store: Any,
    *,
    plugin: str,
    url: str,
    prefix: str,
    endpoint: str | None,
    ctx: BuildContext,
) -> ObstoreBlobStore:
    """Wrap an obstore store for sink `ctx.sink_name`, labelled for error messages.

    `url` is the root's URL (``s3://bucket``); a custom `endpoint` is named
    in the label only, so `url` stays a URL other engines understand.
    """
    from hypaware.blob.store import ObstoreBlobStore

    root = f"{url}/{check_prefix(prefix)}" if check_prefix(prefix) else url
    where = f"{root} at {endpoint}" if endpoint else root
    return ObstoreBlobStore(
        store,
        prefix=prefix,
        label=f"sink {ctx.sink_name!r} ({plugin} {where})",
        url=root,
    )
