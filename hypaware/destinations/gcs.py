"""``@hypaware/gcs``: a destination in a Google Cloud Storage bucket.

Credentials not given in config are found the way obstore finds them
(``GOOGLE_SERVICE_ACCOUNT``, ``GOOGLE_APPLICATION_CREDENTIALS``, then the
metadata service).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from hypaware.core.config import FieldValueError
from hypaware.core.errors import ConfigError
from hypaware.core.secrets import Secret
from hypaware.destinations.remote import RemoteOptions, construct_store, make_blob_store

if TYPE_CHECKING:
    from hypaware.blob.store import ObstoreBlobStore
    from hypaware.core.resolver import BuildContext

__all__ = ["PLUGIN", "GCSConfig", "create"]

PLUGIN = "@hypaware/gcs"


@attrs.frozen(kw_only=True)
class GCSConfig(RemoteOptions):
    """Config of ``@hypaware/gcs`` (plus the keys of `RemoteOptions`).

    - `bucket` (str, required): the bucket; it must exist.
    - `service_account_path` (str, default none): a service-account JSON
      file, relative to the config file's directory.
    - `service_account_key` (Secret, default none): the service-account JSON
      itself (usually ``"${GCS_KEY_JSON}"``).
    - `bearer_token` (Secret, default none): a static OAuth token, not refreshed.

    At most one of the three credentials may be set. `endpoint` maps to
    obstore's ``base_url`` (an emulator or private endpoint).
    """

    bucket: str
    service_account_path: str | None = None
    service_account_key: Secret | None = None
    bearer_token: Secret | None = None

    def __attrs_post_init__(self) -> None:
        if not self.bucket:
            raise FieldValueError("bucket", "must not be empty")
        credentials = {
            "service_account_path": self.service_account_path,
            "service_account_key": self.service_account_key,
            "bearer_token": self.bearer_token,
        }
        given = [name for name, value in credentials.items() if value is not None]
        if len(given) > 1:
            raise FieldValueError(
                given[1], f"must not be set together with {given[0]}: give one credential"
            )


def create(config: GCSConfig, ctx: BuildContext) -> ObstoreBlobStore:
    """Build the blob store for `config` (no request is made)."""
    from obstore.store import GCSStore

    settings: dict[str, Any] = {}
    if config.endpoint is not None:
        settings["base_url"] = config.endpoint.rstrip("/")
    if config.service_account_path is not None:
        key_file = ctx.resolve_path(config.service_account_path)
        if not key_file.is_file():
            raise ConfigError.single(
                f"sinks.{ctx.sink_name}.config.service_account_path",
                f"service account file {str(key_file)!r} does not exist",
            )
        settings["service_account"] = str(key_file)
    key = ctx.reveal(config.service_account_key, "service_account_key")
    if key is not None:
        settings["service_account_key"] = key
    token = ctx.reveal(config.bearer_token, "bearer_token")
    if token is not None:
        settings["bearer_token"] = token
    store = construct_store(
        lambda: GCSStore(
            config.bucket,
            config=settings,  # type: ignore[arg-type]
            client_options=config.client_options(),  # type: ignore[arg-type]
            retry_config=config.retry_config(),  # type: ignore[arg-type]
        ),
        plugin=PLUGIN,
        ctx=ctx,
        secrets=[key, token],
    )
    url = f"gs://{config.bucket}"
    return make_blob_store(
        store, plugin=PLUGIN, url=url, prefix=config.prefix, endpoint=config.endpoint, ctx=ctx
    )
