"""A small loopback server speaking the Google Cloud Storage XML-API calls obstore makes.

No GCS emulator available here accepts obstore's dialect, so the
``@hypaware/gcs`` data path is tested against this: single-request PUT
(with ``x-goog-if-generation-match: 0`` for create-only), the multipart
upload calls (``?uploads``, ``?partNumber=&uploadId=``, complete, abort),
GET with ``Range``, HEAD, ``?list-type=2`` listing with pagination, and
DELETE. Objects carry an ETag, a generation and a Last-Modified date.

It checks a bearer token when given one, answers 404 ``NoSuchBucket`` for
buckets it does not hold, and can be told to fail the next requests with a
status, or with a status and a body of its choosing such as the JSON errors
Google's JSON API and token endpoints answer (to test error translation).
It is not a GCS implementation: no ACLs, no object metadata beyond those
headers, no resumable uploads.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

import attrs

__all__ = ["GCSServer", "run_gcs_server"]

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
_PART = re.compile(r"<Part>(?:(?!</Part>).)*?<PartNumber>(\d+)</PartNumber>", re.DOTALL)


@attrs.define
class _Object:
    data: bytes
    etag: str
    generation: int
    modified: datetime


@attrs.define
class _State:
    buckets: dict[str, dict[str, _Object]]
    token: str | None
    uploads: dict[str, tuple[str, str, dict[int, bytes]]] = attrs.field(factory=dict)
    fail_next: list[int | tuple[int, bytes, str] | None] = attrs.field(factory=list)
    requests: list[tuple[str, str]] = attrs.field(factory=list)
    lock: threading.Lock = attrs.field(factory=threading.Lock)
    ids: Iterator[int] = attrs.field(factory=lambda: itertools.count(1))


def _error(code: str, message: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
        f"<Message>{escape(message)}</Message></Error>"
    ).encode()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # ------------------------------------------------------------------ helpers

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if body and "Content-Type" not in (headers or {}):
            self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _target(self) -> tuple[str, str, dict[str, list[str]]]:
        parts = urlsplit(self.path)
        path = parts.path.lstrip("/")
        bucket, _, key = path.partition("/")
        return unquote(bucket), unquote(key), parse_qs(parts.query, keep_blank_values=True)

    def _meta_headers(self, obj: _Object) -> dict[str, str]:
        return {
            "ETag": obj.etag,
            "Last-Modified": format_datetime(obj.modified, usegmt=True),
            "x-goog-generation": str(obj.generation),
        }

    def _prologue(self) -> tuple[str, str, dict[str, list[str]], dict[str, _Object]] | None:
        state = self.server.state
        bucket, key, query = self._target()
        with state.lock:
            state.requests.append((self.command, self.path))
            fail = state.fail_next.pop(0) if state.fail_next else None
        if isinstance(fail, tuple):
            self._body()
            self._send(fail[0], fail[1], {"Content-Type": fail[2]})
            return None
        if fail is not None:
            self._body()
            self._send(fail, _error("InjectedFailure", f"injected status {fail}"))
            return None
        if state.token is not None:
            auth = self.headers.get("Authorization", "")
            if auth != f"Bearer {state.token}":
                self._body()
                self._send(401, _error("AuthenticationRequired", "invalid credentials"))
                return None
        objects = state.buckets.get(bucket)
        if objects is None:
            self._body()
            self._send(404, _error("NoSuchBucket", "The specified bucket does not exist."))
            return None
        return bucket, key, query, objects

    def _store(self, objects: dict[str, _Object], key: str, data: bytes) -> _Object:
        state = self.server.state
        obj = _Object(
            data=data,
            etag=f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"',
            generation=next(state.ids),
            modified=datetime.now(UTC).replace(microsecond=0),
        )
        objects[key] = obj
        return obj

    # ----------------------------------------------------------------- methods

    def do_PUT(self) -> None:
        target = self._prologue()
        if target is None:
            return
        _bucket, key, query, objects = target
        data = self._body()
        state = self.server.state
        if "uploadId" in query:
            upload_id = query["uploadId"][0]
            number = int(query.get("partNumber", ["0"])[0])
            with state.lock:
                upload = state.uploads.get(upload_id)
                if upload is None:
                    self._send(404, _error("NoSuchUpload", "no such upload"))
                    return
                upload[2][number] = data
            etag = f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"'
            self._send(200, headers={"ETag": etag})
            return
        with state.lock:
            if self.headers.get("x-goog-if-generation-match") == "0" and key in objects:
                self._send(412, _error("PreconditionFailed", "object exists"))
                return
            obj = self._store(objects, key, data)
        self._send(200, headers=self._meta_headers(obj))

    def do_POST(self) -> None:
        target = self._prologue()
        if target is None:
            return
        bucket, key, query, objects = target
        body = self._body()
        state = self.server.state
        if "uploads" in query:
            with state.lock:
                upload_id = f"upload-{next(state.ids)}"
                state.uploads[upload_id] = (bucket, key, {})
            xml = (
                '<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult>'
                f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(key)}</Key>"
                f"<UploadId>{upload_id}</UploadId></InitiateMultipartUploadResult>"
            )
            self._send(200, xml.encode())
            return
        if "uploadId" in query:
            upload_id = query["uploadId"][0]
            with state.lock:
                upload = state.uploads.pop(upload_id, None)
                if upload is None:
                    self._send(404, _error("NoSuchUpload", "no such upload"))
                    return
                wanted = [int(n) for n in _PART.findall(body.decode())]
                if any(n not in upload[2] for n in wanted):
                    self._send(400, _error("InvalidPart", "a listed part was not uploaded"))
                    return
                data = b"".join(upload[2][n] for n in wanted)
                obj = self._store(objects, key, data)
            xml = (
                '<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult>'
                f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(key)}</Key>"
                f"<ETag>{escape(obj.etag)}</ETag></CompleteMultipartUploadResult>"
            )
            self._send(200, xml.encode(), headers={"ETag": obj.etag})
            return
        self._send(400, _error("NotImplemented", "unsupported POST"))

    def do_GET(self) -> None:
        self._get()

    def do_HEAD(self) -> None:
        self._get()

    def _get(self) -> None:
        target = self._prologue()
        if target is None:
            return
        _bucket, key, query, objects = target
        if not key:
            if self.command == "GET" and query.get("list-type") == ["2"]:
                self._list(objects, query)
            else:
                self._send(400, _error("NotImplemented", "unsupported bucket request"))
            return
        with self.server.state.lock:
            obj = objects.get(key)
        if obj is None:
            self._send(404, _error("NoSuchKey", "The specified key does not exist."))
            return
        headers = self._meta_headers(obj)
        headers["Content-Type"] = "application/octet-stream"
        headers["Accept-Ranges"] = "bytes"
        rng = self.headers.get("Range")
        size = len(obj.data)
        if rng is None:
            self._send(200, obj.data, headers)
            return
        match = _RANGE.match(rng.strip())
        if match is None:
            self._send(400, _error("InvalidArgument", "bad range"))
            return
        first, last = match.groups()
        if first == "":
            start, end = max(0, size - int(last)), size - 1
        else:
            start = int(first)
            end = min(int(last), size - 1) if last else size - 1
        if start >= size or end < start:
            headers["Content-Range"] = f"bytes */{size}"
            self._send(416, _error("InvalidRange", "range not satisfiable"), headers)
            return
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        self._send(206, obj.data[start : end + 1], headers)

    def _list(self, objects: dict[str, _Object], query: dict[str, list[str]]) -> None:
        prefix = query.get("prefix", [""])[0]
        delimiter = query.get("delimiter", [""])[0]
        after = query.get("continuation-token", [""])[0] or query.get("start-after", [""])[0]
        limit = int(query.get("max-keys", ["1000"])[0])
        with self.server.state.lock:
            keys = sorted(k for k in objects if k.startswith(prefix) and k > after)
            snapshot = {k: objects[k] for k in keys}
        contents: list[str] = []
        prefixes: list[str] = []
        last = ""
        for key in keys:
            if len(contents) + len(prefixes) >= limit:
                break
            rest = key[len(prefix) :]
            if delimiter and delimiter in rest:
                common = prefix + rest.split(delimiter, 1)[0] + delimiter
                if common not in prefixes:
                    prefixes.append(common)
                last = key
                continue
            obj = snapshot[key]
            stamp = obj.modified.strftime("%Y-%m-%dT%H:%M:%S.000Z")
            contents.append(
                f"<Contents><Key>{escape(key)}</Key><LastModified>{stamp}</LastModified>"
                f"<ETag>{escape(obj.etag)}</ETag><Size>{len(obj.data)}</Size></Contents>"
            )
            last = key
        truncated = bool(keys) and last != keys[-1]
        xml = ['<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>']
        xml.append(f"<Prefix>{escape(prefix)}</Prefix><KeyCount>{len(contents)}</KeyCount>")
        xml.append(f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>")
        if truncated:
            xml.append(f"<NextContinuationToken>{escape(last)}</NextContinuationToken>")
        xml.extend(contents)
        xml.extend(
            f"<CommonPrefixes><Prefix>{escape(p)}</Prefix></CommonPrefixes>" for p in prefixes
        )
        xml.append("</ListBucketResult>")
        self._send(200, "".join(xml).encode())

    def do_DELETE(self) -> None:
        target = self._prologue()
        if target is None:
            return
        _bucket, key, query, objects = target
        state = self.server.state
        with state.lock:
            if "uploadId" in query:
                state.uploads.pop(query["uploadId"][0], None)
                self._send(204)
                return
            if objects.pop(key, None) is None:
                self._send(404, _error("NoSuchKey", "The specified key does not exist."))
                return
        self._send(204)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: _State

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gives up on an upload closes its socket mid-request.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class GCSServer:
    """The running server: `endpoint`, `bucket`, `token`, and test hooks.

    - `fail_next(*statuses)`: answer the next requests with these statuses
      (None lets a request through).
    - `reply_next(status, body)`: answer the next request with this status and
      body (a JSON error, say), whatever it asks for.
    - `objects(bucket)`: a snapshot of a bucket's keys and bytes.
    - `requests`: (method, path) of every request seen, in order.
    """

    def __init__(self, server: _Server, bucket: str, token: str | None) -> None:
        self._server = server
        self.bucket = bucket
        self.token = token
        host, port = server.server_address[:2]
        self.endpoint = f"http://{host!s}:{port}"

    def create_bucket(self, name: str) -> None:
        with self._server.state.lock:
            self._server.state.buckets.setdefault(name, {})

    def fail_next(self, *statuses: int | None) -> None:
        """Answer the next requests with these statuses in turn; None lets one through."""
        with self._server.state.lock:
            self._server.state.fail_next.extend(statuses)

    def reply_next(
        self, status: int, body: bytes | str, content_type: str = "application/json"
    ) -> None:
        """Answer the next request (queued after earlier `fail_next`) with `status` and `body`."""
        data = body.encode() if isinstance(body, str) else body
        with self._server.state.lock:
            self._server.state.fail_next.append((status, data, content_type))

    def clear_failures(self) -> None:
        """Forget failures `fail_next` and `reply_next` queued that no request has used yet."""
        with self._server.state.lock:
            self._server.state.fail_next.clear()

    def objects(self, bucket: str | None = None) -> dict[str, bytes]:
        with self._server.state.lock:
            held = self._server.state.buckets.get(bucket or self.bucket, {})
            return {k: v.data for k, v in held.items()}

    @property
    def requests(self) -> list[tuple[str, str]]:
        with self._server.state.lock:
            return list(self._server.state.requests)


@contextmanager
def run_gcs_server(
    bucket: str = "hypaware-test", *, token: str | None = "test-token", host: str = "127.0.0.1"
) -> Iterator[GCSServer]:
    """Run the server on `host` and a free port for the duration of the block."""
    server = _Server((host, 0), _Handler)
    server.state = _State(buckets={bucket: {}}, token=token)
    thread = threading.Thread(target=server.serve_forever, name="gcs-xml-server", daemon=True)
    thread.start()
    try:
        yield GCSServer(server, bucket, token)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
