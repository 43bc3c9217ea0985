"""A reference central server: real HTTP on loopback, for tests and for trying things out.

It implements ``docs/central-proto.md``: bearer-token auth, NDJSON bodies
(identity, gzip or zstd), dedupe by ``X-Hyp-Batch-Id`` (a chunk seen before
is acknowledged with ``"duplicate": true`` and not stored again), 413 for
bodies over its limit, and the error replies of the contract. It keeps every
stored row in memory and counts requests.

It can be scripted to misbehave: `script()` queues steps consumed one per
request (`Reply` any status with any ``Retry-After`` text or body, `Drop` the
connection before or after storing the rows, `Delay` a reply, or `Hold` it
until the test releases it), and
`rate_limit` answers 429 per gateway past a number of requests per window::

    from hypaware.testing.servers.central import CentralServer, Drop, Reply

    with CentralServer(token="t0ken") as server:
        server.script(Reply(429, retry_after="1"), Drop(after_apply=True))
        ...  # point @hypaware/central at server.url
        assert len(server.rows("events")) == expected

Threads serve the connections; `stop()` (or leaving the ``with`` block)
closes every connection and returns within about a second.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import hmac
import json
import re
import socket
import threading
import time
import zlib
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

import attrs

__all__ = ["CentralServer", "Delay", "Drop", "Hold", "RateLimit", "Reply", "Seen"]

_PATH = re.compile(r"^/v1/datasets/([^/?#]+)/rows$")
_MAX_DECODED = 256 * 1024 * 1024

# What handling a request comes to: its status, the JSON reply, extra headers.
_Outcome = tuple[int, dict[str, Any], dict[str, str]]


@attrs.frozen
class Reply:
    """Answer the next request with `status` instead of handling it (the body is read first).

    `retry_after` is sent verbatim as ``Retry-After`` (any text, even garbage).
    """

    status: int
    retry_after: str | None = None
    body: bytes | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict)


@attrs.frozen
class Drop:
    """Close the connection without answering; with `after_apply`, store the rows first."""

    after_apply: bool = False


@attrs.frozen
class Delay:
    """Wait `seconds` before handling the next request normally."""

    seconds: float


@attrs.frozen
class Hold:
    """Hold the next request until `release` is set, then handle it normally.

    `arrived` is set when the request is being held, so a test can act at that
    moment (for example let the client time out) instead of guessing a delay::

        hold = Hold()
        server.script(hold)
        ...  # the client sends; hold.arrived.wait(...) says it got there
        hold.release.set()

    Stopping the server ends a hold too (the connection is closed unanswered).
    """

    release: threading.Event = attrs.field(factory=threading.Event, eq=False)
    arrived: threading.Event = attrs.field(factory=threading.Event, eq=False)


Step = Reply | Drop | Delay | Hold


@attrs.frozen
class RateLimit:
    """At most `requests` per gateway per `window` seconds; past it, `status` + `retry_after`."""

    requests: int
    window: float = 1.0
    retry_after: str | None = "1"
    status: int = 429


@attrs.frozen
class Seen:
    """One request as the server saw it (no credentials kept)."""

    gateway: str | None
    batch_id: str | None
    dataset: str | None
    body_sha256: str
    status: int | None
    outcome: str


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    app: CentralServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    disable_nagle_algorithm = True

    def setup(self) -> None:
        super().setup()
        # Idle keep-alive connections close on their own (handle_one_request ends on a timeout).
        self.connection.settimeout(self.server.app.idle_timeout)
        self.server.app._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.app._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        self.server.app._handle(self)

    def _not_allowed(self) -> None:
        self.server.app._read_body(self)
        self.server.app._send(self, 405, {"error": {"code": "method", "message": "use POST"}})

    do_GET = do_PUT = do_DELETE = do_PATCH = _not_allowed


class CentralServer:
    """The reference server. `token=None` accepts any request without auth.

    `idle_timeout` (seconds) closes a keep-alive connection that sends nothing
    for that long; `stop()` closes every connection whatever it is set to.
    """

    def __init__(
        self,
        *,
        token: str | None = "test-token",
        host: str = "127.0.0.1",
        port: int = 0,
        max_body_bytes: int = 32 * 1024 * 1024,
        rate_limit: RateLimit | None = None,
        idle_timeout: float = 5.0,
    ) -> None:
        self.token = token
        self.idle_timeout = idle_timeout
        self.max_body_bytes = max_body_bytes
        self.rate_limit = rate_limit
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._script: collections.deque[Step] = collections.deque()
        self._rows: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
        self._batches: dict[str, int] = {}
        self._seen: list[Seen] = []
        self._windows: dict[str, tuple[float, int]] = {}
        self._conns: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"CentralServer({self.url if self._server else 'stopped'})"

    # ------------------------------------------------------------ lifecycle

    def start(self) -> CentralServer:
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server((self._host, self._port), _Handler)
        server.app = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        server.server_close()
        if thread is not None:
            thread.join(timeout=2)
        self._server = None
        self._thread = None

    def __enter__(self) -> CentralServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the server is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # ------------------------------------------------------------ scripting

    def script(self, *steps: Step) -> None:
        """Queue `steps`; each request takes the next one (normal handling once empty)."""
        with self._lock:
            self._script.extend(steps)

    @property
    def pending_script(self) -> int:
        with self._lock:
            return len(self._script)

    # ------------------------------------------------------------ inspection

    def rows(self, dataset: str) -> list[dict[str, Any]]:
        """Every row stored for `dataset`, in arrival order."""
        with self._lock:
            return list(self._rows.get(dataset, ()))

    @property
    def datasets(self) -> list[str]:
        with self._lock:
            return sorted(self._rows)

    @property
    def batches(self) -> dict[str, int]:
        """Stored batch ids and their row counts."""
        with self._lock:
            return dict(self._batches)

    @property
    def seen(self) -> list[Seen]:
        """Every request received, in order."""
        with self._lock:
            return list(self._seen)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._seen)

    def status_counts(self) -> collections.Counter[int | None]:
        with self._lock:
            return collections.Counter(s.status for s in self._seen)

    # -------------------------------------------------------------- serving

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._conns.add(conn)
            else:
                self._conns.discard(conn)

    def _read_body(self, h: _Handler) -> bytes | None:
        try:
            length = int(h.headers.get("Content-Length", ""))
        except ValueError:
            return None
        if length < 0:
            return None
        chunks: list[bytes] = []
        left = length
        while left > 0:
            part = h.rfile.read(min(left, 1 << 20))
            if not part:
                break
            left -= len(part)
            if length <= self.max_body_bytes:
                chunks.append(part)
        return b"".join(chunks)

    def _send(
        self,
        h: _Handler,
        status: int,
        doc: Any = None,
        *,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if body is None:
            body = json.dumps(doc).encode() if doc is not None else b""
        h.send_response(status)
        if doc is not None:
            h.send_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _record(
        self, gateway: str | None, batch: str | None, dataset: str | None, body: bytes,
        status: int | None, outcome: str,
    ) -> None:  # fmt: skip
        digest = hashlib.sha256(body).hexdigest()
        with self._lock:
            self._seen.append(Seen(gateway, batch, dataset, digest, status, outcome))

    def _error(self, h: _Handler, status: int, code: str, message: str, **kw: Any) -> None:
        self._send(h, status, {"error": {"code": code, "message": message}}, **kw)

    def _handle(self, h: _Handler) -> None:
        with self._lock:
            step = self._script.popleft() if self._script else None
        gateway = h.headers.get("X-Hyp-Gateway")
        batch = h.headers.get("X-Hyp-Batch-Id")
        match = _PATH.match(h.path)
        dataset = unquote(match.group(1)) if match else None

        if isinstance(step, Delay) and self._stopping.wait(step.seconds):
            h.close_connection = True
            return
        if isinstance(step, Hold) and not self._hold(step):
            h.close_connection = True
            return
        raw = self._read_body(h)
        body = raw or b""
        if isinstance(step, Reply):
            self._record(gateway, batch, dataset, body, step.status, "scripted")
            headers = dict(step.headers)
            if step.retry_after is not None:
                headers["Retry-After"] = step.retry_after
            doc = None if step.body is not None else {"error": {"code": "scripted"}}
            self._send(h, step.status, doc, body=step.body, headers=headers)
            return
        if isinstance(step, Drop) and not step.after_apply:
            self._record(gateway, batch, dataset, body, None, "dropped")
            h.close_connection = True
            return

        status, doc, extra = self._apply(h, raw, dataset, gateway, batch)
        if isinstance(step, Drop):
            self._record(gateway, batch, dataset, body, None, f"applied ({status}), dropped")
            h.close_connection = True
            return
        self._record(gateway, batch, dataset, body, status, str(doc.get("status", "error")))
        self._send(h, status, doc, headers=extra)

    def _hold(self, step: Hold) -> bool:
        """Wait for `step.release`; False when the server stops first."""
        step.arrived.set()
        # Two events to wait on: poll the release in short waits, checking for a stop.
        while not step.release.wait(0.05):
            if self._stopping.is_set():
                return False
        return True

    def _apply(
        self,
        h: _Handler,
        raw: bytes | None,
        dataset: str | None,
        gateway: str | None,
        batch: str | None,
    ) -> _Outcome:
        if dataset is None:
            return _err(404, "not_found", f"no route {h.path.split('?')[0]!r}")
        if self.token is not None:
            auth = h.headers.get("Authorization", "")
            if not hmac.compare_digest(auth.encode(), f"Bearer {self.token}".encode()):
                return _err(401, "unauthorized", "missing or wrong bearer token")
        if not gateway:
            return _err(400, "bad_request", "X-Hyp-Gateway is required")
        if not batch:
            return _err(400, "bad_request", "X-Hyp-Batch-Id is required")
        if raw is None:
            return _err(411, "length_required", "Content-Length is required")
        length = int(h.headers.get("Content-Length", "0"))
        if length > self.max_body_bytes:
            return _err(413, "too_large", f"body over {self.max_body_bytes} bytes")
        limited = self._rate_limited(gateway)
        if limited is not None:
            return limited
        try:
            data = _decode(raw, h.headers.get("Content-Encoding", "identity"))
        except ValueError as exc:
            return _err(415 if "unsupported" in str(exc) else 400, "encoding", str(exc))
        want = h.headers.get("X-Hyp-Content-Sha256")
        if want and hashlib.sha256(data).hexdigest() != want.lower():
            return _err(400, "digest", "X-Hyp-Content-Sha256 does not match the body")
        with self._lock:
            if batch in self._batches:
                ack = {"status": "duplicate", "batch_id": batch, "rows": self._batches[batch]}
                return 200, {**ack, "duplicate": True}, {}
        return self._store_rows(h, data, dataset, batch)

    def _store_rows(self, h: _Handler, data: bytes, dataset: str, batch: str) -> _Outcome:
        """Parse the NDJSON body and store its rows, unless `batch` is stored already."""
        rows: list[dict[str, Any]] = []
        for n, line in enumerate(data.split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                return _err(422, "bad_row", f"line {n} is not JSON")
            if not isinstance(row, dict):
                return _err(422, "bad_row", f"line {n} is not a JSON object")
            rows.append(row)
        declared = h.headers.get("X-Hyp-Rows")
        if declared is not None and declared != str(len(rows)):
            return _err(400, "row_count", f"X-Hyp-Rows says {declared}, body has {len(rows)}")
        with self._lock:
            duplicate = batch in self._batches
            if not duplicate:
                self._batches[batch] = len(rows)
                self._rows[dataset].extend(rows)
            count = self._batches[batch]
        status_text = "duplicate" if duplicate else "accepted"
        ack = {"status": status_text, "batch_id": batch, "rows": count, "duplicate": duplicate}
        return 200, ack, {}

    def _rate_limited(self, gateway: str) -> tuple[int, dict[str, Any], dict[str, str]] | None:
        limit = self.rate_limit
        if limit is None:
            return None
        now = time.monotonic()
        with self._lock:
            start, count = self._windows.get(gateway, (now, 0))
            if now - start >= limit.window:
                start, count = now, 0
            count += 1
            self._windows[gateway] = (start, count)
        if count <= limit.requests:
            return None
        headers = {} if limit.retry_after is None else {"Retry-After": limit.retry_after}
        doc = {"error": {"code": "rate_limited", "message": f"gateway {gateway} is over its rate"}}
        return limit.status, doc, headers


def _err(status: int, code: str, message: str) -> _Outcome:
    return status, {"error": {"code": code, "message": message}}, {}


def _decode(raw: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding == "gzip":
        try:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = d.decompress(raw, _MAX_DECODED)
        except zlib.error as exc:
            raise ValueError(f"body is not valid gzip: {exc}") from None
        return out
    if encoding == "zstd":
        try:
            import zstandard
        except ImportError:
            raise ValueError("unsupported Content-Encoding zstd (zstandard missing)") from None
        parts: list[bytes] = []
        total = 0
        try:
            with zstandard.ZstdDecompressor().stream_reader(raw) as reader:
                while total < _MAX_DECODED:
                    part = reader.read(1 << 20)
                    if not part:
                        break
                    parts.append(part)
                    total += len(part)
        except zstandard.ZstdError as exc:
            raise ValueError(f"body is not valid zstd: {exc}") from None
        return b"".join(parts)
    raise ValueError(f"unsupported Content-Encoding {encoding!r}")
