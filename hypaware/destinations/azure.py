"""``@hypaware/azure``: a destination in an Azure Blob Storage container.

Credentials not given in config are found the way obstore finds them (the
``AZURE_*`` environment variables, managed identity, the Azure CLI).
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

__all__ = ["PLUGIN", "AzureConfig", "create"]

PLUGIN = "@hypaware/azure"


@attrs.frozen(kw_only=True)
class AzureConfig(RemoteOptions):
    """Config of ``@hypaware/azure`` (plus the keys of `RemoteOptions`).

    - `account` (str, required): the storage account name.
    - `container` (str, required): the container; it must exist.
    - `account_key` (Secret, default none): the account's shared key.
    - `sas_token` (Secret, default none): a SAS token (query string, with
      or without the leading ``?``).

    At most one of `account_key` and `sas_token`. `endpoint` is the blob
    service URL including the account when the service needs it (azurite:
    ``http://127.0.0.1:10000/devstoreaccount1``).
    """

    account: str
    container: str
    account_key: Secret | None = None
    sas_token: Secret | None = None

    def __attrs_post_init__(self) -> None:
        for name, value in (("account", self.account), ("container", self.container)):
            if not value:
                raise FieldValueError(name, "must not be empty")
        if self.account_key is not None and self.sas_token is not None:
            raise FieldValueError(
                "sas_token", "must not be set together with account_key: give one credential"
            )


def create(config: AzureConfig, ctx: BuildContext) -> ObstoreBlobStore:
    """Build the blob store for `config` (no request is made)."""
    from obstore.store import AzureStore

    settings: dict[str, Any] = {"account_name": config.account}
    if config.endpoint is not None:
        settings["endpoint"] = config.endpoint.rstrip("/")
    key = ctx.reveal(config.account_key, "account_key")
    if key is not None:
        settings["account_key"] = key
    sas = ctx.reveal(config.sas_token, "sas_token")
    if sas is not None:
        settings["sas_key"] = sas.removeprefix("?")
    store = construct_store(
        lambda: AzureStore(
            config.container,
            config=settings,  # type: ignore[arg-type]
            client_options=config.client_options(),  # type: ignore[arg-type]
            retry_config=config.retry_config(),  # type: ignore[arg-type]
        ),
        plugin=PLUGIN,
        ctx=ctx,
        secrets=[key, sas],
    )
    # az://<container> is how obstore and fsspec name a container; the
    # account shows in the label through the endpoint.
    endpoint = config.endpoint or f"https://{config.account}.blob.core.windows.net"
    return make_blob_store(
        store,
        plugin=PLUGIN,
        url=f"az://{config.container}",
        prefix=config.prefix,
        endpoint=endpoint,
        ctx=ctx,
    )
