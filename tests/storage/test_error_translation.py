"""translate_error on the shapes obstore produces, without a server."""

from __future__ import annotations

import pytest
from obstore import exceptions as obx

from hypaware.blob.errors import translate_error
from hypaware.core.errors import (
    AlreadyExistsError,
    NotFoundError,
    PathError,
    PermissionDeniedError,
    StoreError,
    TransientStoreError,
)

LABEL = "sink 'archive' (@hypaware/azure az://acct/c)"
URL = "https://acct.blob.core.windows.net/c/x?sv=2021&sig=TOPSECRET"


def _http(status: str, code: str = "") -> str:
    body = f"<Error><Code>{code}</Code></Error>" if code else ""
    return (
        f"Generic error: Error performing GET {URL} in 3ms - Server returned non-2xx "
        f"status code: {status}: {body}\n\nDebug source:\nGeneric {{ url: {URL} }}"
    )


@pytest.mark.parametrize(
    ("exc", "kind", "words"),
    [
        (FileNotFoundError(_http("404 Not Found", "BlobNotFound")), NotFoundError, "no such"),
        (obx.AlreadyExistsError("exists"), AlreadyExistsError, "already exists"),
        (obx.PermissionDeniedError(_http("403 Forbidden")), PermissionDeniedError, "403"),
        (obx.UnauthenticatedError("no token"), PermissionDeniedError, "permission"),
        (obx.GenericError(_http("401 Unauthorized")), PermissionDeniedError, "401"),
        (
            obx.GenericError(_http("503 Service Unavailable", "SlowDown")),
            TransientStoreError,
            "SlowDown",
        ),
        (obx.GenericError(_http("429 Too Many Requests")), TransientStoreError, "429"),
        (obx.GenericError(_http("500 Internal Server Error")), TransientStoreError, "500"),
        (
            obx.GenericError(_http("400 Bad Request", "ServerBusy")),
            TransientStoreError,
            "ServerBusy",
        ),
        (
            obx.GenericError(
                f"Error performing PUT {URL} - HTTP error: error sending request\n"
                "retries: 3, kind: Timeout"
            ),
            TransientStoreError,
            "timed out",
        ),
        (
            obx.GenericError("Generic LocalFileSystem error: Connection refused (os error 111)"),
            TransientStoreError,
            "temporary",
        ),
        (TimeoutError("read timed out"), TransientStoreError, "timed out"),
        (
            obx.GenericError(_http("404 Not Found", "ContainerNotFound")),
            StoreError,
            "does not exist",
        ),
        (obx.GenericError(_http("400 Bad Request", "InvalidHeaderValue")), StoreError, "400"),
        (obx.NotSupportedError("no"), StoreError, "NotSupportedError"),
        (ValueError("Could not parse path: bad path"), PathError, "refused"),
    ],
)
def test_classification(exc: BaseException, kind: type[StoreError], words: str) -> None:
    error = translate_error(exc, label=LABEL, op="read", path="x")
    assert type(error) is kind
    text = str(error)
    assert text.startswith(f"{LABEL}: cannot read 'x'")
    assert words in text
    assert "TOPSECRET" not in text
    assert "sig=" not in text
    assert error.path == "x"


def test_precondition_on_create_means_already_exists() -> None:
    exc = obx.PreconditionError(_http("412 Precondition Failed"))
    assert isinstance(translate_error(exc, label=LABEL, op="create", path="x"), AlreadyExistsError)
    assert type(translate_error(exc, label=LABEL, op="write", path="x")) is StoreError


def test_our_own_errors_pass_through() -> None:
    mine = NotFoundError("already ours")
    assert translate_error(mine, label=LABEL, op="read", path="x") is mine
