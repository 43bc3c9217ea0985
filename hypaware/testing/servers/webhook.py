"""A reference webhook receiver on loopback, for tests of ``@hypaware/webhook``.

It does what docs/request-sinks.md asks of a receiver: every request goes
through `hypaware.webhooks.verify` (signature, timestamp tolerance, replay,
routing headers bound to the signed id), a rejected one is answered 401
(bad signature) or 400 (anything else) and kept in `rejections`; a chunk's
rows are stored once per ``webhook-id`` (a re-send or a replay is
acknowledged, not stored again; a replay is also kept in `rejections`),
from JSON-array or NDJSON bodies, gzip-compressed or not.

Answers can be scripted: queue items in `script` and they are sent before
normal handling resumes. An item is a ``(status, retry_after)`` pair, an
`Answer` (any status, headers and body bytes, sent as given), or a
`Trickle` (a reply whose headers dribble out a byte at a time).

    with run_webhook_receiver("shared-secret") as receiver:
        ...  # point a sink at receiver.url
        receiver.rows["events"]
"""

from __future__ import annotations

import collections
import gzip
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

import attrs

from hypaware.webhooks import SeenMessages, WebhookVerificationError, verify, verify_body

__all__ = ["Answer", "Trickle", "WebhookReceiver", "run_webhook_receiver"]


@attrs.frozen
class Answer:
    """A scripted reply, sent byte for byte (``Content-Length`` is added)."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""


@attrs.frozen
class Trickle:
    """A reply whose status line and headers are sent one byte every `interval` seconds.

    It stops when the client goes away, the receiver shuts down, or after
    `max_bytes` bytes (then it finishes the reply with a 200).
    """

    interval: float = 0.05
    max_bytes: int = 2_000


Scripted = tuple[int, str | None] | Answer | Trickle


class WebhookReceiver:
    """The receiver's state; `run_webhook_receiver` serves it on 127.0.0.1.

    - `secret`: the signing secret, or several (key rotation: any may match).
    - `scheme`: ``"standard-webhooks"`` (default) or the weaker ``"body-hmac"``.
    - `tolerance`: seconds a timestamp may be off; `clock`: epoch seconds.
    """

    def __init__(
        self,
        secret: str | Sequence[str],
        *,
        scheme: str = "standard-webhooks",
        tolerance: float = 300,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.secrets = [secret] if isinstance(secret, str) else list(secret)
        self.scheme = scheme
        self.tolerance = tolerance
        self.clock = clock
        self.seen = SeenMessages(tolerance)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.script: collections.deque[Scripted] = collections.deque()
        self.rows: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
        self.keys: set[str] = set()
        self.requests: list[dict[str, str]] = []
        self.bodies: list[bytes] = []
        self.rejections: list[WebhookVerificationError] = []
        self.bad_signatures = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def handle(self, headers: dict[str, str], body: bytes) -> Scripted:
        """The answer to one POST."""
        with self.lock:
            self.requests.append(headers)
            self.bodies.append(body)
            if self.script:
                return self.script.popleft()
        lower = {k.lower(): v for k, v in headers.items()}
        try:
            key, dataset = self._check(headers, lower, body)
        except WebhookVerificationError as exc:
            with self.lock:
                self.rejections.append(exc)
                if exc.reason == "signature":
                    self.bad_signatures += 1
            if exc.reason == "replay":
                # Genuine, and stored already: acknowledge, store nothing.
                return 200, None
            return (401 if exc.reason == "signature" else 400), None
        if lower.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        with self.lock:
            if key not in self.keys:
                self.keys.add(key)
                rows = self.rows[dataset]
                if lower.get("content-type") == "application/json":
                    rows.extend(json.loads(body))
                else:
                    rows.extend(json.loads(line) for line in body.splitlines())
            self.seen.add(key, self.clock())
        return 200, None

    def _check(
        self, headers: dict[str, str], lower: dict[str, str], body: bytes
    ) -> tuple[str, str]:
        """The dedupe key and dataset of a genuine request; `WebhookVerificationError` if not."""
        if self.scheme == "body-hmac":
            offered = lower.get("x-hyp-signature", "")
            if not any(verify_body(s, body, offered) for s in self.secrets):
                raise WebhookVerificationError("signature", "X-Hyp-Signature does not match")
            return lower["idempotency-key"], unquote(lower["x-hyp-dataset"])
        hook = verify(headers, body, self.secrets, self.tolerance, seen=self.seen, now=self.clock())
        return hook.id, hook.dataset

    def rows_of(self, dataset: str) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.rows.get(dataset, ()))


def _handler_for(receiver: WebhookReceiver) -> type[BaseHTTPRequestHandler]:
    """A request handler class answering through `receiver`."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            answer = receiver.handle(dict(self.headers.items()), body)
            if isinstance(answer, Trickle):
                self._trickle(answer)
                return
            if isinstance(answer, tuple):
                status, retry_after = answer
                extra = () if retry_after is None else (("Retry-After", retry_after),)
                answer = Answer(status, extra)
            self.send_response(answer.status)
            for name, value in answer.headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        def _trickle(self, trickle: Trickle) -> None:
            head = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"." * trickle.max_bytes
            self.close_connection = True
            try:
                for i in range(len(head)):
                    if receiver.stopping.wait(trickle.interval):
                        return
                    self.wfile.write(head[i : i + 1])
                    self.wfile.flush()
                self.wfile.write(b"\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                return  # the client gave up: what the test wants

    return Handler


@contextmanager
def run_webhook_receiver(
    secret: str | Sequence[str],
    *,
    scheme: str = "standard-webhooks",
    tolerance: float = 300,
    clock: Callable[[], float] = time.time,
) -> Iterator[WebhookReceiver]:
    """Serve a `WebhookReceiver` on a free loopback port until the block ends."""
    receiver = WebhookReceiver(secret, scheme=scheme, tolerance=tolerance, clock=clock)
    thread = threading.Thread(target=receiver.server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.stopping.set()
        receiver.server.shutdown()
        receiver.server.server_close()
        thread.join(2)
