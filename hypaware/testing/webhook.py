"""A reference webhook receiver on loopback, for tests of ``@hypaware/webhook``.

It does what docs/request-sinks.md asks of a receiver: it checks the
HMAC-SHA256 signature (``X-Hyp-Signature``), stores a chunk's rows once per
``Idempotency-Key`` (a repeated key is acknowledged, not stored again), and
reads JSON-array and NDJSON bodies. Answers can be scripted: queue
``(status, retry_after)`` pairs in `script` and they are sent before normal
handling resumes.

    with run_webhook_receiver("shared-secret") as receiver:
        ...  # point a sink at receiver.url
        receiver.rows["events"]
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

__all__ = ["WebhookReceiver", "run_webhook_receiver", "verify_signature"]


def verify_signature(secret: bytes, body: bytes, header: str) -> bool:
    """Whether `header` is the ``sha256=<hex>`` HMAC of `body` under `secret`."""
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header)


class WebhookReceiver:
    """The receiver's state; `run_webhook_receiver` serves it on 127.0.0.1."""

    def __init__(self, secret: str) -> None:
        self.secret = secret.encode()
        self.lock = threading.Lock()
        self.script: collections.deque[tuple[int, str | None]] = collections.deque()
        self.rows: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
        self.keys: set[str] = set()
        self.requests: list[dict[str, str]] = []
        self.bad_signatures = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status, retry_after = receiver.handle(dict(self.headers.items()), body)
                self.send_response(status)
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def handle(self, headers: dict[str, str], body: bytes) -> tuple[int, str | None]:
        """The answer to one POST: ``(status, Retry-After or None)``."""
        with self.lock:
            self.requests.append(headers)
            if self.script:
                return self.script.popleft()
            if not verify_signature(self.secret, body, headers.get("X-Hyp-Signature", "")):
                self.bad_signatures += 1
                return 401, None
            key = headers["Idempotency-Key"]
            if key not in self.keys:
                self.keys.add(key)
                rows = self.rows[unquote(headers["X-Hyp-Dataset"])]  # sent percent-encoded
                if headers.get("Content-Type") == "application/json":
                    rows.extend(json.loads(body))
                else:
                    rows.extend(json.loads(line) for line in body.splitlines())
            return 200, None

    def rows_of(self, dataset: str) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.rows.get(dataset, ()))


@contextmanager
def run_webhook_receiver(secret: str) -> Iterator[WebhookReceiver]:
    """Serve a `WebhookReceiver` on a free loopback port until the block ends."""
    receiver = WebhookReceiver(secret)
    thread = threading.Thread(target=receiver.server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
        thread.join(2)
