"""``@hypaware/s3``: a destination in an S3 (or S3-compatible) bucket.

Credentials not given in config are found the way obstore finds them: the
``AWS_*`` environment variables, then the instance or container metadata
service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from hypaware.core.config import FieldValueError
from hypaware.core.secrets import Secret
from hypaware.destinations.remote import RemoteOptions, construct_store, make_blob_store

if TYPE_CHECKING:
    from hypaware.blob.store import ObstoreBlobStore
    from hypaware.core.resolver import BuildContext

__all__ = ["PLUGIN", "S3Config", "create"]

PLUGIN = "@hypaware/s3"


@attrs.frozen(kw_only=True)
class S3Config(RemoteOptions):
    """Config of ``@hypaware/s3`` (plus the keys of `RemoteOptions`).

    - `bucket` (str, required): the bucket; it must exist.
    - `region` (str, default: ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, else
      ``us-east-1``).
    - `access_key_id`, `secret_access_key`, `session_token` (Secret, default:
      from the environment): static credentials; the first two go together.
    """

    bucket: str
    region: str | None = None
    access_key_id: Secret | None = None
    secret_access_key: Secret | None = None
    session_token: Secret | None = None

    def __attrs_post_init__(self) -> None:
        if not self.bucket:
            raise FieldValueError("bucket", "must not be empty")
        if (self.access_key_id is None) != (self.secret_access_key is None):
            missing = "secret_access_key" if self.secret_access_key is None else "access_key_id"
            raise FieldValueError(
                missing, "must be set together with access_key_id and secret_access_key"
            )


def create(config: S3Config, ctx: BuildContext) -> ObstoreBlobStore:
    """Build the blob store for `config` (no request is made)."""
    from obstore.store import S3Store

    settings: dict[str, Any] = {}
    if config.region is not None:
        settings["region"] = config.region
    if config.endpoint is not None:
        settings["endpoint"] = config.endpoint
    secrets = {
        "access_key_id": config.access_key_id,
        "secret_access_key": config.secret_access_key,
        "session_token": config.session_token,
    }
    for name, secret in secrets.items():
        value = ctx.reveal(secret, name)
        if value is not None:
            settings[name] = value
    store = construct_store(
        lambda: S3Store(
            config.bucket,
            config=settings,  # type: ignore[arg-type]
            client_options=config.client_options(),  # type: ignore[arg-type]
            retry_config=config.retry_config(),  # type: ignore[arg-type]
        ),
        plugin=PLUGIN,
        ctx=ctx,
        secrets=[settings.get(k) for k in ("access_key_id", "secret_access_key", "session_token")],
    )
    url = f"s3://{config.bucket}"
    return make_blob_store(
        store, plugin=PLUGIN, url=url, prefix=config.prefix, endpoint=config.endpoint, ctx=ctx
    )
