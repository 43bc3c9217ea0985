"""Translating obstore's exceptions into hypaware's, the same way for every store.

obstore reports one failure differently per backend (a missing object is the
builtin `FileNotFoundError`, a failed listing of a missing bucket is a
`GenericError` carrying the HTTP status), so the classification looks at the
exception type first and then at the status and error code in its text.
Messages are rebuilt from a short summary (operation, path, HTTP status, the
service's error code, the kind of network failure): the backend's own text
can hold URLs with signed query strings, so it is never copied whole.
"""

from __future__ import annotations

import re

from hypaware.core.errors import (
    AlreadyExistsError,
    NotFoundError,
    PathError,
    PermissionDeniedError,
    StoreError,
    TransientStoreError,
)

__all__ = ["translate_error"]

_STATUS = re.compile(r"status code: (\d{3})(?: ([A-Za-z][A-Za-z ]{0,40}))?")
_CODE = re.compile(r"<Code>([A-Za-z0-9.]{1,64})</Code>")
_HTTP_KIND = re.compile(r"kind: (Connect|Timeout|Request|Body|Decode|Redirect|Builder)\b")
# "Read-only file system (os error 30)", "No space left on device (os error 28)".
_OS_ERROR = re.compile(r"([A-Z][a-z][A-Za-z -]{2,60}) \(os error (\d+)\)")
# A JSON error body (GCS's JSON API): {"error": {"code": 400, "message": "..."}}.
_JSON_MESSAGE = re.compile(r'"message"\s*:\s*"([^"\\]{1,200})"')

_MISSING_CONTAINER = frozenset({"NoSuchBucket", "ContainerNotFound", "ResourceNotFound"})
_AUTH_CODES = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AuthenticationFailed",
        "AuthorizationFailure",
        "AuthorizationPermissionMismatch",
        "ExpiredToken",
        "InvalidToken",
        "InvalidClientTokenId",
    }
)
_THROTTLE_CODES = frozenset(
    {"SlowDown", "ServerBusy", "RequestTimeout", "InternalError", "ServiceUnavailable"}
)
_TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_TRANSIENT_OS = frozenset({"Connection refused", "Connection reset by peer", "Timed out"})


def _summary(text: str) -> tuple[int | None, str | None, str]:
    """(HTTP status, service error code, a short secret-free description)."""
    head = text.split("\n\nDebug source:", 1)[0]
    status_match = _STATUS.search(head)
    code_match = _CODE.search(text)
    status = int(status_match.group(1)) if status_match else None
    code = code_match.group(1) if code_match else None
    if status_match:
        words = (status_match.group(2) or "").strip()
        desc = f"HTTP {status} {words}".strip()
        if code:
            desc += f" ({code})"
        else:
            said = _JSON_MESSAGE.search(text)
            if said and "://" not in said.group(1):  # a URL can carry a signed query
                desc += f": {said.group(1)}"
        return status, code, desc
    kind = _HTTP_KIND.search(text)
    if "error sending request" in text or kind:
        what = {"Connect": "cannot connect", "Timeout": "timed out"}.get(
            kind.group(1) if kind else "", "request failed"
        )
        retries = re.search(r"retries: (\d+)", text)
        tail = f" after {retries.group(1)} retries" if retries and retries.group(1) != "0" else ""
        return None, None, f"{what}{tail}"
    if "timed out" in text.lower() or "timeout" in text.lower():
        return None, None, "timed out"
    os_error = _OS_ERROR.search(text)
    if os_error:
        return None, None, f"{os_error.group(1)} (os error {os_error.group(2)})"
    return None, None, ""


def translate_error(exc: BaseException, *, label: str, op: str, path: str | None) -> StoreError:
    """The hypaware error for an exception obstore raised while doing `op` on `path`.

    `label` names the store (sink and destination plugin). The result is to
    be raised ``from exc``.
    """
    if isinstance(exc, StoreError):
        return exc
    from obstore import exceptions as obx

    text = str(exc)
    status, code, desc = _summary(text)
    where = f"{label}: cannot {op}" + (f" {path!r}" if path else "")
    because = f": {desc}" if desc else ""

    if code in _MISSING_CONTAINER or "bucket does not exist" in text:
        return StoreError(f"{where}: the bucket or container does not exist{because}", path=path)
    if isinstance(exc, obx.AlreadyExistsError) or (
        isinstance(exc, obx.PreconditionError) and op.startswith("create")
    ):
        return AlreadyExistsError(f"{where}: an object already exists there", path=path)
    if isinstance(exc, (FileNotFoundError, obx.NotFoundError)) or status == 404:
        return NotFoundError(f"{where}: no such object", path=path)
    if (
        isinstance(exc, (obx.PermissionDeniedError, obx.UnauthenticatedError, PermissionError))
        or status in (401, 403)
        or code in _AUTH_CODES
        or "Permission denied" in text
    ):
        return PermissionDeniedError(
            f"{where}: permission denied; check the credentials and their access{because}",
            path=path,
        )
    if (
        status in _TRANSIENT_STATUS
        or code in _THROTTLE_CODES
        or isinstance(exc, (TimeoutError, ConnectionError, obx.JoinError))
        or (status is None and desc.startswith(("cannot connect", "timed out", "request failed")))
        or any(s in text for s in _TRANSIENT_OS)
    ):
        return TransientStoreError(f"{where}: temporary failure{because}", path=path)
    if isinstance(exc, (ValueError, obx.InvalidPathError)) and "path" in text.lower():
        return PathError(f"{where}: the store refused the path", path=path)
    if not desc and isinstance(exc, OSError) and exc.strerror:
        desc = exc.strerror  # a local filesystem's own words ("Not a directory")
    return StoreError(f"{where}: {desc or type(exc).__name__}", path=path)
