"""Translating obstore's exceptions into hypaware's, the same way for every store.

obstore reports one failure differently per backend (a missing object is the
builtin `FileNotFoundError`, a failed listing of a missing bucket is a
`GenericError` carrying the HTTP status), so the classification looks at the
exception type first and then at the status and error code in its text.
Messages are rebuilt from a short summary (operation, path, HTTP status, the
service's error code, the kind of network failure): the backend's own text
can hold URLs with signed query strings, so it is never copied whole.

Google answers some requests (its JSON API, token endpoints) with a JSON body
instead of XML: ``{"error": {"code": 400, "message": "...", "errors": [{"reason":
"invalid", ...}]}}``, or OAuth's ``{"error": "invalid_grant", "error_description":
"..."}``. Its reason is kept as the error code and its message after it, cut to
`_MESSAGE_LIMIT` characters with URLs, bearer tokens, ``token=``-style values
and token-like strings replaced (`_scrub`). OAuth's refusals (``invalid_grant``
...) and a token request the server refuses are permission errors.
"""

from __future__ import annotations

import json
import re
from typing import Any

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
# obstore puts the response body after the status line verbatim:
# "... status code: 400 Bad Request: {"error": {...}}\n\nDebug source: ...".
_JSON_LIMIT = 64 * 1024  # a longer body is searched, not parsed
_MESSAGE_LIMIT = 200
_REASON = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
# When the body cannot be parsed (cut, too long): its fields, escapes and all.
_JSON_FIELD = re.compile(
    r'"(message|error_description|reason|error)"\s*:\s*"((?:[^"\\\n]|\\.){1,4096})"'
)
# What `_scrub` hides in a message (a service may echo a request back).
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,15}://\S*")
_SCHEME_AUTH = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9+/=_.~-]+")
_ASSIGNED = re.compile(
    r"(?i)\b((?:access_|refresh_|id_)?token|client_secret|secret|password|assertion"
    r"|signature|sig|credential|x-goog-signature|x-goog-credential|private_key|api_?key)"
    r"(\s*[=:]\s*[\"']?)[^\s\"'&,;]+"
)
_TOKENISH = re.compile(r"[A-Za-z0-9+/_.~-]{24,}")
_HEX = re.compile(r"[0-9a-fA-F]{32,}")

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
        # OAuth token endpoints (Google's included).
        "invalid_grant",
        "invalid_client",
        "unauthorized_client",
    }
)
_THROTTLE_CODES = frozenset(
    {"SlowDown", "ServerBusy", "RequestTimeout", "InternalError", "ServiceUnavailable"}
)
_TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_TRANSIENT_OS = frozenset({"Connection refused", "Connection reset by peer", "Timed out"})


def _hide_token(match: re.Match[str]) -> str:
    run = match.group(0)
    mixed = any(c.isupper() for c in run) and any(c.islower() for c in run)
    if (mixed and any(c.isdigit() for c in run)) or _HEX.search(run):
        return "<redacted>"
    return run


def _scrub(value: object) -> str | None:
    """A service's message as one short line without URLs or credentials; None if empty."""
    if not isinstance(value, str):
        return None
    text = " ".join("".join(c if c.isprintable() else " " for c in value).split())
    text = _TOKENISH.sub(_hide_token, text)  # first: nothing below splits a token
    text = _URL.sub("<url>", text)  # a URL can carry a signed query
    text = _SCHEME_AUTH.sub(r"\1 <redacted>", text)
    text = _ASSIGNED.sub(r"\1\2<redacted>", text)
    if len(text) > _MESSAGE_LIMIT:
        text = text[: _MESSAGE_LIMIT - 1].rstrip() + "\u2026"
    return text or None


def _reason(value: object) -> str | None:
    """`value` if it looks like an error code (``invalid``, ``invalid_grant``), not a token."""
    if not isinstance(value, str) or not _REASON.fullmatch(value):
        return None
    return value if _TOKENISH.sub(_hide_token, value) == value else None


def _from_json(doc: Any) -> tuple[str | None, str | None]:
    """(reason, message) of a parsed JSON error body, each None when absent."""
    if not isinstance(doc, dict):
        return None, None
    error = doc.get("error")
    if isinstance(error, str):  # OAuth: {"error": "invalid_grant", "error_description": ...}
        return _reason(error), _scrub(doc.get("error_description"))
    if not isinstance(error, dict):
        return None, _scrub(doc.get("message"))
    items = error.get("errors")
    details = [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
    reason = next((r for r in (_reason(i.get("reason")) for i in details) if r), None)
    message = _scrub(error.get("message"))
    if message is None:
        message = next((m for m in (_scrub(i.get("message")) for i in details) if m), None)
    return reason or _reason(error.get("status")), message


def _json_error(head: str, after: int) -> tuple[str | None, str | None]:
    """(reason, message) of the JSON error body in `head` after the status line at `after`."""
    rest = head[after:]
    colon = rest.find(": ")
    body = rest[colon + 2 :].lstrip() if 0 <= colon <= 60 else ""
    if body.startswith("{") and len(body) <= _JSON_LIMIT:
        try:
            doc, _end = json.JSONDecoder().raw_decode(body)
        except (ValueError, RecursionError):
            pass
        else:
            return _from_json(doc)
    if '"' not in body:
        return None, None
    fields: dict[str, str] = {}
    for match in _JSON_FIELD.finditer(body[:_JSON_LIMIT]):
        try:
            fields.setdefault(match.group(1), json.loads(f'"{match.group(2)}"'))
        except ValueError:
            continue
    reason = _reason(fields.get("reason")) or _reason(fields.get("error"))
    return reason, _scrub(fields.get("message")) or _scrub(fields.get("error_description"))


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
        message = None
        if code is None:
            code, message = _json_error(head, status_match.end())
        if code:
            desc += f" ({code})"
        if message:
            desc += f": {message}"
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
    # No access token for these credentials (a metadata server's 404 included).
    token_refused = (
        "Error performing token request" in text
        and status is not None
        and 400 <= status < 500
        and status not in _TRANSIENT_STATUS
    )
    if (isinstance(exc, (FileNotFoundError, obx.NotFoundError)) or status == 404) and not (
        token_refused
    ):
        return NotFoundError(f"{where}: no such object", path=path)
    if (
        isinstance(exc, (obx.PermissionDeniedError, obx.UnauthenticatedError, PermissionError))
        or token_refused
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
