"""The reference central server answers as docs/central-proto.md says."""

from __future__ import annotations

import gzip
import hashlib
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from hypaware.testing.servers.central import CentralServer, Delay, Drop, Hold, RateLimit, Reply
from tests.timing import PROMPT

from .conftest import TOKEN

BODY = b'{"a":1}\n{"a":2}\n'


def headers(batch: str = "hc1-x", **extra: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {TOKEN}",
        "X-Hyp-Gateway": "gw",
        "X-Hyp-Batch-Id": batch,
        "Content-Type": "application/x-ndjson",
        **extra,
    }


@pytest.fixture
def client(central: CentralServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=central.url, timeout=PROMPT) as c:
        yield c


PATH = "/v1/datasets/events/rows"


def test_stores_and_dedupes(central: CentralServer, client: httpx.Client) -> None:
    first = client.post(PATH, content=BODY, headers=headers())
    assert first.status_code == 200
    assert first.json() == {
        "status": "accepted",
        "batch_id": "hc1-x",
        "rows": 2,
        "duplicate": False,
    }
    again = client.post(PATH, content=BODY, headers=headers())
    assert again.json()["duplicate"] is True and again.json()["rows"] == 2
    assert central.rows("events") == [{"a": 1}, {"a": 2}]
    assert central.batches == {"hc1-x": 2} and central.request_count == 2


def test_compressed_bodies_and_checks(central: CentralServer, client: httpx.Client) -> None:
    digest = hashlib.sha256(BODY).hexdigest()
    ok = client.post(
        PATH,
        content=gzip.compress(BODY),
        headers=headers("g", **{"Content-Encoding": "gzip", "X-Hyp-Content-Sha256": digest}),
    )
    assert ok.status_code == 200
    import zstandard

    z = zstandard.ZstdCompressor().compress(BODY)
    assert (
        client.post(PATH, content=z, headers=headers("z", **{"Content-Encoding": "zstd"})).json()[
            "rows"
        ]
        == 2
    )
    cases = [
        (headers("d", **{"X-Hyp-Content-Sha256": "0" * 64}), BODY, 400),
        (headers("r", **{"X-Hyp-Rows": "3"}), BODY, 400),
        (headers("e", **{"Content-Encoding": "br"}), BODY, 415),
        (headers("b", **{"Content-Encoding": "gzip"}), b"not gzip", 400),
        (headers("j"), b'{"a":1}\nnot json\n', 422),
        (headers("l"), b"[1,2]\n", 422),
        ({k: v for k, v in headers().items() if k != "X-Hyp-Gateway"}, BODY, 400),
        ({k: v for k, v in headers().items() if k != "X-Hyp-Batch-Id"}, BODY, 400),
        (headers(Authorization="Bearer nope"), BODY, 401),
    ]
    for hdrs, body, status in cases:
        resp = client.post(PATH, content=body, headers=hdrs)
        assert resp.status_code == status, (hdrs, resp.text)
        assert "message" in resp.json()["error"]
    assert client.post("/v2/other", content=BODY, headers=headers()).status_code == 404
    assert client.get(PATH).status_code == 405
    assert len(central.rows("events")) == 4  # only "g" and "z" were stored


def test_body_limit() -> None:
    with CentralServer(token=TOKEN, max_body_bytes=10) as small:
        resp = httpx.post(small.url + PATH, content=BODY, headers=headers())
        assert resp.status_code == 413 and small.rows("events") == []


def test_scripted_steps(central: CentralServer, client: httpx.Client) -> None:
    central.script(Reply(429, retry_after="soon-ish"), Drop(after_apply=True), Delay(0.2), Drop())
    resp = client.post(PATH, content=BODY, headers=headers("s1"))
    assert resp.status_code == 429 and resp.headers["Retry-After"] == "soon-ish"
    with pytest.raises(httpx.RemoteProtocolError):
        client.post(PATH, content=BODY, headers=headers("s1"))
    assert central.batches == {"s1": 2}  # stored before the hang-up
    start = time.monotonic()
    assert client.post(PATH, content=BODY, headers=headers("s2")).status_code == 200
    assert time.monotonic() - start >= 0.2
    with pytest.raises(httpx.RemoteProtocolError):
        client.post(PATH, content=BODY, headers=headers("s3"))
    assert "s3" not in central.batches
    assert [s.outcome for s in central.seen] == [
        "scripted",
        "applied (200), dropped",
        "accepted",
        "dropped",
    ]


def test_a_held_request_is_handled_when_released(central: CentralServer) -> None:
    hold = Hold()
    central.script(hold)
    with ThreadPoolExecutor(1) as pool, httpx.Client(base_url=central.url, timeout=PROMPT) as c:
        reply = pool.submit(c.post, PATH, content=BODY, headers=headers("h1"))
        assert hold.arrived.wait(PROMPT)
        assert not reply.done() and central.rows("events") == []
        hold.release.set()
        assert reply.result(PROMPT).status_code == 200
    assert central.batches == {"h1": 2}


def test_stop_ends_a_hold_without_storing() -> None:
    hold = Hold()
    server = CentralServer(token=None).start()
    server.script(hold)
    with ThreadPoolExecutor(1) as pool, httpx.Client(base_url=server.url, timeout=PROMPT) as c:
        reply = pool.submit(c.post, PATH, content=BODY, headers=headers("h2"))
        assert hold.arrived.wait(PROMPT)
        server.stop()
        with pytest.raises(httpx.TransportError):
            reply.result(PROMPT)
    assert server.batches == {} and not hold.release.is_set()


def test_rate_limit_is_per_gateway(central: CentralServer, client: httpx.Client) -> None:
    central.rate_limit = RateLimit(requests=2, window=60, retry_after="7")
    codes = [
        client.post(PATH, content=BODY, headers=headers(f"a{i}")).status_code for i in range(3)
    ]
    assert codes == [200, 200, 429]
    other = headers("b0", **{"X-Hyp-Gateway": "gw-other"})
    assert client.post(PATH, content=BODY, headers=other).status_code == 200


def test_stop_closes_idle_keep_alive_connections_quickly() -> None:
    # Left alone, the idle connection would stay open for an hour: only stop()
    # can end it within PROMPT, and stop() must not wait for it either.
    server = CentralServer(token=None, idle_timeout=3600).start()
    host, port = server.url.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)))
    conn.settimeout(PROMPT)
    conn.sendall(b"POST /v1/datasets/x/rows HTTP/1.1\r\nHost: h\r\nX-Hyp-Gateway: g\r\n"
                 b"X-Hyp-Batch-Id: k\r\nContent-Length: 8\r\n\r\n{\"a\":1}\n")  # fmt: skip
    received = conn.recv(4096)
    assert b" 200 " in received
    start = time.monotonic()
    server.stop()
    assert time.monotonic() - start < PROMPT
    while part := conn.recv(4096):  # the rest of the reply, then the server's hang-up
        received += part
    assert received.endswith(b"}")
    conn.close()
