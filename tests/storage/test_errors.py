"""obstore errors come out as hypaware's typed errors, alike on every store, without secrets."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from hypaware.blob.store import ObstoreBlobStore
from hypaware.core.errors import (
    NotFoundError,
    PathError,
    PermissionDeniedError,
    StoreError,
    TransientStoreError,
)
from hypaware.plugins import azure, gcs, s3
from hypaware.testing.servers.peers import AzuritePeer, GCSServer, S3Peer, free_port

from .conftest import build_store, make_ctx

NO_RETRY = {"max_retries": 0, "retry_timeout": 2.0, "connect_timeout": 2.0, "timeout": 5.0}
SECRET = "s3cr3t-Value-that-must-not-leak"


def _s3(peer: S3Peer, tmp_path: Path, **over: Any) -> ObstoreBlobStore:
    config = {
        "bucket": peer.bucket,
        "endpoint": peer.endpoint,
        "region": peer.region,
        "access_key_id": peer.access_key_id,
        "secret_access_key": peer.secret_access_key,
        **NO_RETRY,
        **over,
    }
    return build_store(s3.MANIFEST, config, make_ctx(tmp_path))


def _azure(peer: AzuritePeer, tmp_path: Path, **over: Any) -> ObstoreBlobStore:
    config = {
        "account": peer.account,
        "container": peer.container,
        "account_key": peer.account_key,
        "endpoint": peer.endpoint,
        **NO_RETRY,
        **over,
    }
    return build_store(azure.MANIFEST, config, make_ctx(tmp_path))


def _gcs(server: GCSServer, tmp_path: Path, **over: Any) -> ObstoreBlobStore:
    config = {
        "bucket": server.bucket,
        "endpoint": server.endpoint,
        "bearer_token": server.token,
        **NO_RETRY,
        **over,
    }
    return build_store(gcs.MANIFEST, config, make_ctx(tmp_path))


async def _each_operation(
    store: ObstoreBlobStore, *, head: bool = True, delete: bool = True
) -> list[BaseException]:
    errors: list[BaseException] = []
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: store.put("x/y.bin", b"data"),
        lambda: store.get("x/y.bin"),
    ]
    if delete:
        calls.append(lambda: store.delete("x/y.bin"))
    if head:
        calls.append(lambda: store.head("x/y.bin"))
    for call in calls:
        with pytest.raises(StoreError) as info:
            await call()
        errors.append(info.value)
    with pytest.raises(StoreError) as listing:
        [m async for m in store.list("x")]
    errors.append(listing.value)
    return errors


def _assert_clean(errors: list[BaseException], *secrets: str) -> None:
    for error in errors:
        text = str(error)
        assert "sink 'archive'" in text, text
        for secret in secrets:
            assert secret not in text, text


# --------------------------------------------------------------- missing bucket
# A HEAD response has no body, so a missing bucket is indistinguishable from
# a missing object there: head() reports NotFoundError. Azure's delete
# ignores every 404 inside obstore, so it cannot see a missing container.
# Both are documented in docs/destinations.md.


@pytest.mark.s3
async def test_s3_unknown_bucket(moto_s3: S3Peer, tmp_path: Path) -> None:
    store = _s3(moto_s3, tmp_path, bucket="no-such-bucket")
    errors = await _each_operation(store, head=False)
    for error in errors:
        assert not isinstance(error, NotFoundError | TransientStoreError)
        assert "does not exist" in str(error)
        assert "@hypaware/s3" in str(error)
    _assert_clean(errors, moto_s3.secret_access_key)


@pytest.mark.azure
async def test_azure_unknown_container(azurite: AzuritePeer, tmp_path: Path) -> None:
    store = _azure(azurite, tmp_path, container="no-such-container")
    errors = await _each_operation(store, head=False, delete=False)
    for error in errors:
        assert not isinstance(error, NotFoundError | TransientStoreError)
        assert "does not exist" in str(error)
        assert "@hypaware/azure" in str(error)
    _assert_clean(errors, azurite.account_key)


@pytest.mark.gcs
async def test_gcs_unknown_bucket(gcs_server: GCSServer, tmp_path: Path) -> None:
    store = _gcs(gcs_server, tmp_path, bucket="no-such-bucket")
    errors = await _each_operation(store, head=False)
    for error in errors:
        assert not isinstance(error, NotFoundError | TransientStoreError)
        assert "does not exist" in str(error)
    _assert_clean(errors, str(gcs_server.token))


# ------------------------------------------------------------ wrong credentials


@pytest.mark.s3
async def test_s3_wrong_credentials(moto_s3_auth: S3Peer, tmp_path: Path) -> None:
    store = _s3(moto_s3_auth, tmp_path, access_key_id="AKIAUNKNOWN", secret_access_key=SECRET)
    errors = await _each_operation(store)
    assert all(isinstance(e, PermissionDeniedError) for e in errors), errors
    assert all(isinstance(e, PermissionError) for e in errors)
    _assert_clean(errors, SECRET)


@pytest.mark.azure
async def test_azure_wrong_key(azurite: AzuritePeer, tmp_path: Path) -> None:
    wrong = "V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3JvbmdLZXk="
    store = _azure(azurite, tmp_path, account_key=wrong)
    errors = await _each_operation(store)
    assert all(isinstance(e, PermissionDeniedError) for e in errors), errors
    _assert_clean(errors, wrong)


@pytest.mark.azure
async def test_azure_wrong_sas_token_is_not_echoed(azurite: AzuritePeer, tmp_path: Path) -> None:
    sas = f"sv=2021-08-06&ss=b&srt=sco&sp=rwdl&se=2099-01-01T00:00:00Z&sig={SECRET}"
    store = _azure(azurite, tmp_path, account_key=None, sas_token=sas)
    errors = await _each_operation(store)
    assert all(isinstance(e, PermissionDeniedError) for e in errors), errors
    _assert_clean(errors, SECRET, "sig=")


@pytest.mark.gcs
async def test_gcs_wrong_token(gcs_server: GCSServer, tmp_path: Path) -> None:
    store = _gcs(gcs_server, tmp_path, bearer_token=SECRET)
    errors = await _each_operation(store)
    assert all(isinstance(e, PermissionDeniedError) for e in errors), errors
    _assert_clean(errors, SECRET)


# ---------------------------------------------------------- unreachable / 5xx


@pytest.mark.parametrize("kind", ["s3", "azure", "gcs"])
async def test_unreachable_endpoint_is_transient(kind: str, tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    ctx = make_ctx(tmp_path)
    if kind == "s3":
        config: dict[str, Any] = {
            "bucket": "b-1",
            "access_key_id": "AKIA",
            "secret_access_key": SECRET,
            "region": "us-east-1",
        }
        manifest = s3.MANIFEST
    elif kind == "azure":
        config = {"account": "acct", "container": "c", "account_key": "c2VjcmV0"}
        endpoint += "/acct"
        manifest = azure.MANIFEST
    else:
        config = {"bucket": "b", "bearer_token": SECRET}
        manifest = gcs.MANIFEST
    store = build_store(manifest, {**config, "endpoint": endpoint, **NO_RETRY}, ctx)
    errors = await _each_operation(store)
    assert all(isinstance(e, TransientStoreError) for e in errors), errors
    assert "cannot connect" in str(errors[0])
    _assert_clean(errors, SECRET)


@pytest.mark.gcs
@pytest.mark.parametrize("status", [429, 500, 503])
async def test_server_errors_are_transient(
    gcs_server: GCSServer, tmp_path: Path, status: int
) -> None:
    store = _gcs(gcs_server, tmp_path, prefix="transient")
    gcs_server.fail_next(status)
    with pytest.raises(TransientStoreError) as info:
        await store.put("x", b"1")
    assert str(status) in str(info.value)
    await store.put("x", b"1")  # the next request goes through


@pytest.mark.gcs
async def test_a_failed_multipart_upload_leaves_nothing(
    gcs_server: GCSServer, tmp_path: Path
) -> None:
    store = _gcs(gcs_server, tmp_path, prefix="midway")

    async def stream() -> AsyncIterator[bytes]:
        for _ in range(4):
            yield b"p" * (5 * 1024 * 1024)

    before = len(gcs_server.requests)
    gcs_server.fail_next(None, None, 500, 500, 500, 500)  # initiate, part 1, then failures
    with pytest.raises(StoreError):
        await store.put("big", stream())
    gcs_server.clear_failures()
    methods = [m for m, _ in gcs_server.requests[before:]]
    assert methods[:2] == ["POST", "PUT"]  # the upload started and a part landed
    assert [k for k in gcs_server.objects() if k.startswith("midway/")] == []
    with pytest.raises(NotFoundError):
        await store.head("big")


@pytest.mark.gcs
async def test_refused_paths_make_no_request(gcs_server: GCSServer, tmp_path: Path) -> None:
    store = _gcs(gcs_server, tmp_path, prefix="refused")
    before = len(gcs_server.requests)
    for bad in ("../escape", "/abs", "a/./b", "x\x00"):
        with pytest.raises(PathError):
            await store.put(bad, b"1")
        with pytest.raises(PathError):
            await store.get(bad)
    assert len(gcs_server.requests) == before


# ------------------------------------------------------------ JSON error bodies
# Google's JSON API and its token endpoints answer errors in JSON, not XML:
# its message and reason are kept in the description, without secrets.

_SIGNED = f"https://storage.googleapis.com/b/o?X-Goog-Signature={SECRET}"


def _json_error(status: int, message: str, reason: str) -> str:
    """The body of a Google JSON API error."""
    detail = {"message": message, "domain": "global", "reason": reason}
    return json.dumps({"error": {"code": status, "message": message, "errors": [detail]}})


async def _refused_put(
    store: ObstoreBlobStore, gcs_server: GCSServer, status: int, body: str, *, times: int = 1
) -> StoreError:
    """The error of a put the server answers with `body` (`times` answers queued)."""
    for _ in range(times):
        gcs_server.reply_next(status, body)
    try:
        with pytest.raises(StoreError) as info:
            await store.put("x", b"1")
    finally:
        gcs_server.clear_failures()
    return info.value


@pytest.mark.gcs
@pytest.mark.parametrize(
    ("status", "body", "kind", "said"),
    [
        (
            400,
            _json_error(400, "Invalid bucket name: 'x'", "invalid"),
            StoreError,
            "HTTP 400 Bad Request (invalid): Invalid bucket name: 'x'",
        ),
        (
            400,
            json.dumps({"error": "invalid_grant", "error_description": "Invalid JWT Signature."}),
            PermissionDeniedError,
            "HTTP 400 Bad Request (invalid_grant): Invalid JWT Signature.",
        ),
        (
            403,
            json.dumps(
                json.loads(
                    _json_error(
                        403,
                        "sa@p.iam.gserviceaccount.com does not have storage.objects.create access",
                        "forbidden",
                    )
                ),
                indent=2,
            ),
            PermissionDeniedError,
            "HTTP 403 Forbidden (forbidden): sa@p.iam.gserviceaccount.com does not have",
        ),
        (
            429,
            _json_error(429, "The rate of change requests is too high.", "rateLimitExceeded"),
            TransientStoreError,
            "(rateLimitExceeded): The rate of change requests is too high.",
        ),
        (
            400,
            json.dumps({"error": {"code": 400, "message": 'bad "name"\n\u00e9'}}),
            StoreError,
            'HTTP 400 Bad Request: bad "name" \u00e9',
        ),
        (
            400,
            _json_error(400, f"see {_SIGNED}, Bearer {SECRET} and token={SECRET}", "invalid"),
            StoreError,
            "(invalid): see <url> Bearer <redacted> and token=<redacted>",
        ),
        (
            400,
            _json_error(400, " ".join(["words"] * 100), "invalid"),
            StoreError,
            "(invalid): words words",
        ),
    ],
)
async def test_gcs_json_errors_keep_their_message(
    gcs_server: GCSServer,
    tmp_path: Path,
    status: int,
    body: str,
    kind: type[StoreError],
    said: str,
) -> None:
    store = _gcs(gcs_server, tmp_path, prefix="json")
    error = await _refused_put(store, gcs_server, status, body)
    text = str(error)
    assert type(error) is kind, text
    assert said in text
    assert len(text) < 400
    _assert_clean([error], SECRET, str(gcs_server.token), "Signature=", "Debug", "performing")


@pytest.mark.gcs
async def test_gcs_json_error_on_every_operation(gcs_server: GCSServer, tmp_path: Path) -> None:
    store = _gcs(gcs_server, tmp_path, prefix="json")
    body = _json_error(400, "Invalid argument.", "invalid")
    for _ in range(4):  # put, get, delete, list (a HEAD answer has no body)
        gcs_server.reply_next(400, body)
    try:
        errors = await _each_operation(store, head=False)
    finally:
        gcs_server.clear_failures()
    for error in errors:
        assert type(error) is StoreError, error
        assert "HTTP 400 Bad Request (invalid): Invalid argument." in str(error)
    _assert_clean(errors, str(gcs_server.token))


@pytest.mark.gcs
@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (
            400,
            json.dumps({"error": "invalid_grant", "error_description": "Invalid JWT Signature."}),
            "HTTP 400 Bad Request (invalid_grant): Invalid JWT Signature.",
        ),
        (404, "service account not found", "HTTP 404 Not Found"),
    ],
)
async def test_gcs_refused_token_request(
    gcs_server: GCSServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    status: int,
    body: str,
    said: str,
) -> None:
    """obstore asks the metadata server for a token (GCE_METADATA_HOST points it here)."""
    for name in list(os.environ):
        if name.startswith("GOOGLE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))  # no gcloud application-default credentials
    host = gcs_server.endpoint.removeprefix("http://")
    monkeypatch.setenv("GCE_METADATA_HOST", host)
    monkeypatch.setenv("GCE_METADATA_IP", host)
    store = _gcs(gcs_server, tmp_path, bearer_token=None, prefix="token")
    before = len(gcs_server.requests)
    # obstore tries the metadata host, then its IP.
    error = await _refused_put(store, gcs_server, status, body, times=4)
    paths = [p for _, p in gcs_server.requests[before:]]
    assert paths and all("/computeMetadata/v1/" in p for p in paths), paths
    assert type(error) is PermissionDeniedError, error
    assert said in str(error)
    _assert_clean([error], "computeMetadata", "Debug", "performing")
