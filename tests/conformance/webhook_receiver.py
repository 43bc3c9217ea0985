"""A webhook receiver on loopback that does what the webhook docs ask of one.

It checks the HMAC-SHA256 signature, stores a chunk's rows once per
``Idempotency-Key`` (a repeated key is acknowledged, not stored again), and
can be told to answer 429 for a while.
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


class WebhookReceiver:
    def __init__(self, key: str) -> None:
        self.key = key.encode()
        self.lock = threading.Lock()
        self.rows: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
        self.keys: set[str] = set()
        self.throttle = 0
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
        with self.lock:
            if self.throttle:
                self.throttle -= 1
                return 429, "30"
            expected = "sha256=" + hmac.new(self.key, body, hashlib.sha256).hexdigest()
            if not hmac.compare_digest(expected, headers.get("X-Hyp-Signature", "")):
                return 401, None
            key = headers["Idempotency-Key"]
            if key not in self.keys:
                self.keys.add(key)
                dataset = unquote(headers["X-Hyp-Dataset"])  # sent percent-encoded
                self.rows[dataset].extend(json.loads(line) for line in body.splitlines())
            return 200, None

    def rows_of(self, dataset: str) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.rows.get(dataset, ()))


@contextmanager
def run_receiver(key: str) -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver(key)
    thread = threading.Thread(target=receiver.server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
        thread.join(2)
