"""translate_error on the shapes obstore produces, without a server."""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st
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


# ------------------------------------------------------------ JSON error bodies
# Google's JSON API and token endpoints answer errors in JSON. obstore 0.12.1
# puts the body verbatim after the status line, then a Debug dump where it is
# escaped again (seen against a loopback server; tests/storage/test_errors.py
# checks the same through obstore itself).

GCS_URL = "http://127.0.0.1:9/bkt/a%2Fb"


def _gcs_http(status: str, body: str, *, prefix: str = "Generic GCS error: ") -> str:
    number = status.split()[0]
    return (
        f"{prefix}Error performing PUT {GCS_URL} in 1.2ms - Server returned non-2xx "
        f'status code: {status}: {body}\n\nDebug source:\nGeneric {{\n    store: "GCS",\n'
        f"    source: RetryError(\n        RetryErrorImpl {{\n            method: PUT,\n"
        f"            inner: Status {{\n                status: {number},\n"
        f"                body: Some(\n                    {json.dumps(body)},\n"
        "                ),\n            },\n        },\n    ),\n}"
    )


def _describe(body: str, status: str = "400 Bad Request") -> StoreError:
    return translate_error(
        obx.GenericError(_gcs_http(status, body)), label=LABEL, op="write", path="x"
    )


def _google(message: object = None, reason: object = None, **more: object) -> str:
    error: dict[str, object] = {"code": 400, **more}
    if message is not None:
        error["message"] = message
    if reason is not None:
        error["errors"] = [{"message": message, "domain": "global", "reason": reason}]
    return json.dumps({"error": error})


@pytest.mark.parametrize(
    ("body", "kind", "said"),
    [
        (
            _google("Invalid bucket name: 'x'", "invalid"),
            StoreError,
            "HTTP 400 Bad Request (invalid): Invalid bucket name: 'x'",
        ),
        (
            json.dumps({"error": "invalid_grant", "error_description": "Invalid JWT Signature."}),
            PermissionDeniedError,
            "HTTP 400 Bad Request (invalid_grant): Invalid JWT Signature.",
        ),
        (
            json.dumps({"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}}),
            StoreError,
            "(INVALID_ARGUMENT): bad",
        ),
        (
            json.dumps({"error": {"errors": [{"reason": "required", "message": "need it"}]}}),
            StoreError,
            "(required): need it",
        ),
        (json.dumps({"message": "top-level words"}), StoreError, "HTTP 400 Bad Request: top"),
        (
            json.dumps({"error": {"message": 'say "hi"\n\tand\u00e9 bye'}}, indent=2),
            StoreError,
            'HTTP 400 Bad Request: say "hi" and\u00e9 bye',
        ),
        # cut short, so not parseable: the fields are still found
        (_google("still said", "invalid")[:-3], StoreError, "(invalid): still said"),
        ("<html><body>Bad gateway</body></html>", StoreError, "HTTP 400 Bad Request"),
        # a reason that looks like a token is not a reason
        (
            json.dumps({"error": "ya29.A0ARrdaM9Xk2pQ7vLm3nB8cZ1wE5rT6yU4iO0p"}),
            StoreError,
            "HTTP 400 Bad Request",
        ),
    ],
)
def test_json_error_bodies(body: str, kind: type[StoreError], said: str) -> None:
    error = _describe(body)
    assert type(error) is kind
    assert said in str(error)
    assert "ya29" not in str(error)
    assert "Debug" not in str(error)


def test_xml_code_wins_over_json() -> None:
    text = _http("400 Bad Request", "InvalidArgument") + ' {"message": "json words"}'
    error = translate_error(obx.GenericError(text), label=LABEL, op="read", path="x")
    assert "(InvalidArgument)" in str(error)
    assert "json words" not in str(error)


def test_a_long_message_is_cut() -> None:
    words = " ".join(["permission"] * 60)
    text = str(_describe(_google(words, "forbidden"), "403 Forbidden"))
    said = text.split("(forbidden): ", 1)[1]
    assert len(said) == 200
    assert said.endswith("\u2026")
    assert said.startswith("permission permission")


def test_token_refusals_are_permission_errors() -> None:
    for status in ("400 Bad Request", "404 Not Found"):
        text = _gcs_http(status, "{}").replace(
            "Error performing PUT", "Error performing token request: Error performing GET", 1
        )
        error = translate_error(obx.GenericError(text), label=LABEL, op="write", path="x")
        assert type(error) is PermissionDeniedError, status
    text = _gcs_http("503 Service Unavailable", "{}").replace(
        "Error performing PUT", "Error performing token request: Error performing GET", 1
    )
    error = translate_error(obx.GenericError(text), label=LABEL, op="write", path="x")
    assert type(error) is TransientStoreError


# A bound for the whole message past the label and "cannot write 'x': ".
_BOUND = 400

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
google_shaped = st.fixed_dictionaries(
    {
        "error": st.one_of(
            st.text(),
            st.fixed_dictionaries(
                {},
                optional={
                    "code": json_values,
                    "message": json_values,
                    "status": json_values,
                    "errors": st.lists(
                        st.fixed_dictionaries(
                            {}, optional={"message": json_values, "reason": json_values}
                        ),
                        max_size=3,
                    )
                    | json_values,
                },
            ),
            json_values,
        )
    },
    optional={"error_description": json_values, "message": json_values},
)


@given(doc=st.one_of(google_shaped, json_values), indent=st.sampled_from([None, 2]))
def test_any_json_body_is_described_briefly(doc: object, indent: int | None) -> None:
    error = _describe(json.dumps(doc, indent=indent))
    assert isinstance(error, StoreError)
    assert len(str(error)) <= len(LABEL) + _BOUND


@given(body=st.text(max_size=2000))
def test_any_body_text_is_described_briefly(body: str) -> None:
    error = _describe(body)
    assert isinstance(error, StoreError)
    assert len(str(error)) <= len(LABEL) + _BOUND


def test_deeply_nested_json_does_not_crash() -> None:
    error = _describe("[" * 50_000 + "]" * 50_000)
    assert str(error).endswith("HTTP 400 Bad Request")
    error = _describe('{"error": ' * 5_000 + '"x"' + "}" * 5_000)
    assert isinstance(error, StoreError)


secrets_ = st.text(
    alphabet=string.ascii_letters + string.digits + "-_", min_size=24, max_size=64
).filter(
    lambda s: (
        any(c.isupper() for c in s) and any(c.islower() for c in s) and any(c.isdigit() for c in s)
    )
)
placements = st.sampled_from(
    [
        "{}",
        "Bearer {}",
        "token={}",
        "access_token: {}",
        "https://storage.googleapis.com/b/o?X-Goog-Signature={}&x=1",
        "/b/o?X-Goog-Credential=sa%40p&X-Goog-Signature={}",
    ]
)


@given(
    secret=secrets_,
    placement=placements,
    before=st.text(max_size=80),
    after=st.text(max_size=80),
    oauth=st.booleans(),
)
def test_credentials_in_a_message_are_never_shown(
    secret: str, placement: str, before: str, after: str, oauth: bool
) -> None:
    message = f"{before} {placement.format(secret)} {after}"
    if oauth:
        body = json.dumps({"error": "invalid_grant", "error_description": message})
    else:
        body = _google(message, "invalid")
    text = str(_describe(body))
    assert secret not in text
    assert "X-Goog-Signature=" + secret[:8] not in text


words = st.lists(st.from_regex(r"[a-z']{1,12}", fullmatch=True), min_size=1, max_size=40)


@given(said=words, reason=st.from_regex(r"[a-z][a-zA-Z]{0,20}", fullmatch=True))
def test_plain_messages_are_kept(said: list[str], reason: str) -> None:
    message = " ".join(said)
    kept = message if len(message) <= 200 else message[:199].rstrip() + "\u2026"
    assert f"({reason}): {kept}" in str(_describe(_google(message, reason)))
