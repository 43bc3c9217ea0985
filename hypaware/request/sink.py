"""The machinery shared by request sinks (`@hypaware/central`, `@hypaware/webhook`).

A `RequestSink` streams each partition of an `ExportBatch` into bounded,
deterministic chunks (`hypaware.request.chunking`) and POSTs them one at a time
through one httpx client, following `hypaware.request.backoff`:

- 429 and 503 are backpressure: the same chunk (same bytes, same id) is
  retried in place after a wait that honours a positive ``Retry-After``
  and otherwise climbs the ladder.
- Connection errors, timeouts, 408, 425 and the other 5xx are retried on
  the ladder (their ``Retry-After`` is not consulted).
- 400, 413 and 422 are about the rows: the partition comes back in
  ``retry_partitions`` with ``retryable=False`` (the driver parks it) and a
  message saying what to change.
- 401, 403, 404 and the other 4xx, redirects, TLS failures, malformed
  acknowledgements and configuration errors are about the endpoint or the
  configuration: the partition comes back with ``sink_fault=True`` and the
  rest of the batch is not tried. The driver halts the sink, parks nothing,
  and tries it again on a capped backoff.
- A chunk whose next wait would pass the inline budget stops the partition,
  which comes back with ``sink_fault=True`` too (the endpoint is asking us to
  slow down, or cannot be reached); the rest of the batch is not tried.
- The request deadline (`Timeouts.deadline`) bounds the whole life of one
  chunk, requests and waits together: a server trickling its reply a byte
  at a time cannot hold a chunk longer. Past it the partition comes back
  for a later tick, exactly as when the budget runs out.
- Only a 2xx body has to decode: a 429 or 5xx is judged by its status
  whatever its body holds.

`close()` aborts a parked wait or an in-flight request at once and closes
the client. Secrets given to the sink are scrubbed from every message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import attrs

from hypaware.core.contracts import AsyncClosing
from hypaware.core.errors import ConfigError, EncodeError, HypawareError, SinkClosedError
from hypaware.core.types import (
    ExportBatch,
    ExportOptions,
    ExportResult,
    PartitionRef,
    RequestEvent,
    RetryPartition,
)
from hypaware.request.backoff import (
    AbortableSleep,
    BackoffPolicy,
    Backpressure,
    BudgetExceededError,
    Clock,
    DeadlineExceededError,
    Sleep,
    WaitAbortedError,
    retry_call,
)
from hypaware.request.chunking import Chunk, ChunkIdentity, ChunkLimits, chunk_batches, compress
from hypaware.request.endpoints import safe_url
from hypaware.request.replies import describe, is_tls_error, read_reply, timeout_kind
from hypaware.request.wire import PermanentRequestError, Reply, Wire, server_message

if TYPE_CHECKING:
    import httpx

__all__ = ["RequestSink", "Timeouts"]

log = logging.getLogger("hypaware.sinks.request")

_LADDER_STATUSES = frozenset({408, 425, 500, 502, 504})
_BACKPRESSURE_STATUSES = frozenset({429, 503})
_CLOSE_GRACE = 2.0


@attrs.frozen
class Timeouts:
    """Seconds to wait for a connection, for each read or write on it, and for one chunk.

    `deadline` bounds one chunk from its first request to its
    acknowledgement, every retry and wait included.
    """

    connect: float = 10.0
    read: float = 60.0
    deadline: float = 360.0


@attrs.define
class _BatchTally:
    """What one `RequestSink.export_batch` call delivered, and what it hands back.

    Once `stop_reason` is set, every partition left is handed back with it
    untried (a sink fault when `stop_fault`).
    """

    exported: list[str] = attrs.Factory(list)
    retry: list[RetryPartition] = attrs.Factory(list)
    rows: int = 0
    size: int = 0
    stop_reason: str | None = None
    stop_fault: bool = False
    unexpected: bool = False

    def stop(self, reason: str, *, sink_fault: bool = False) -> None:
        self.stop_reason, self.stop_fault = reason, sink_fault


class RequestSink(AsyncClosing):
    """A `hypaware.core.contracts.Sink` that POSTs chunks of rows through a `Wire`.

    `transport`, `sleep` and `clock` are for tests (an ``httpx.MockTransport``,
    a fake-clock sleep, a fake epoch clock for HTTP-dates).
    """

    def __init__(
        self,
        name: str,
        wire: Wire,
        *,
        gateway: str,
        limits: ChunkLimits | None = None,
        codec: str = "none",
        policy: BackoffPolicy | None = None,
        timeouts: Timeouts | None = None,
        secrets: Iterable[str] = (),
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.time,
    ) -> None:
        import httpx

        from hypaware._version import __version__

        self.name = name
        self.wire = wire
        self.gateway = gateway
        self.limits = limits or ChunkLimits()
        compress(b"", codec)  # an unknown codec or a missing zstandard fails here, not mid-export
        self.codec = codec
        self.policy = policy or BackoffPolicy()
        t = timeouts or Timeouts()
        self.deadline = t.deadline
        # Very short values would mangle messages more than they could reveal.
        self._secrets = tuple(sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True))
        self._clock = clock
        self._abort = AbortableSleep(sleep)
        self._closed = False
        self._active = 0
        self._idle = asyncio.Event()
        self._idle.set()
        # Redirects are never followed: a 3xx could carry the credentials to another host.
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(connect=t.connect, read=t.read, write=t.read, pool=t.connect),
            follow_redirects=False,
            transport=transport,
            headers={"User-Agent": f"hypaware/{__version__}"},
            # HTTPS_PROXY / NO_PROXY / SSL_CERT_FILE from the environment apply, as for curl.
            trust_env=True,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.wire.plugin}, gateway={self.gateway!r})"

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------- lifecycle

    async def close(self) -> None:
        """Abort any wait or request in flight, let exports report, close the client."""
        if self._closed:
            return
        self._closed = True
        self._abort.abort()
        if self._active:
            try:
                await asyncio.wait_for(self._idle.wait(), _CLOSE_GRACE)
            except TimeoutError:
                log.warning("sink %r: an export did not stop within %ss", self.name, _CLOSE_GRACE)
        await self._client.aclose()

    # --------------------------------------------------------------- export

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        """POST every partition of `batch`; see the module docstring for what comes back."""
        if self._closed:
            raise SinkClosedError(f"sink {self.name!r} is closed")
        self._active += 1
        self._idle.clear()
        try:
            return await self._export(batch, opts)
        finally:
            self._active -= 1
            if not self._active:
                self._idle.set()

    async def _export(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        loop = asyncio.get_running_loop()
        deadline = None if opts.timeout is None else loop.time() + opts.timeout
        tally = _BatchTally()
        for part in batch.partitions:
            if tally.stop_reason is not None:
                tally.retry.append(
                    RetryPartition(part.id, tally.stop_reason, sink_fault=tally.stop_fault)
                )
                continue
            await self._try_partition(batch, part, deadline, opts, tally)
        self._log_failures(batch, tally.retry)
        return ExportResult(
            exported=tally.exported,
            retry_partitions=tally.retry,
            rows_written=tally.rows,
            bytes_written=tally.size,
        )

    async def _try_partition(
        self,
        batch: ExportBatch,
        part: PartitionRef,
        deadline: float | None,
        opts: ExportOptions,
        tally: _BatchTally,
    ) -> None:
        """Export `part` and record in `tally` how it went, halting the batch if it must."""
        try:
            n, b = await self._export_partition(batch, part, deadline, opts)
        except WaitAbortedError:
            reason = f"sink {self.name!r} closed before this partition was delivered"
            tally.stop(reason)
            tally.retry.append(RetryPartition(part.id, reason))
        except (BudgetExceededError, DeadlineExceededError) as exc:
            # Backpressure or an endpoint out of reach past the budget: the
            # endpoint's state, not the rows', so the sink halts on a backoff.
            reason = self._scrub(f"partition {part.id}: {exc}")
            tally.retry.append(RetryPartition(part.id, reason, sink_fault=True))
            tally.stop(
                f"not tried: endpoint {safe_url(self.wire.url(batch.dataset.name))} "
                "is applying backpressure or cannot be reached",
                sink_fault=True,
            )
        except PermanentRequestError as exc:
            reason = self._scrub(str(exc))
            if exc.rows_fault:
                tally.retry.append(RetryPartition(part.id, reason, retryable=False))
            else:
                tally.retry.append(
                    RetryPartition(part.id, reason, retryable=False, sink_fault=True)
                )
                tally.stop(f"not tried: the sink halted: {reason}", sink_fault=True)
        except ConfigError as exc:
            reason = self._scrub(str(exc))
            tally.retry.append(RetryPartition(part.id, reason, retryable=False, sink_fault=True))
            tally.stop(f"not tried: the sink halted: {reason}", sink_fault=True)
        except EncodeError as exc:
            tally.retry.append(RetryPartition(part.id, self._scrub(str(exc)), retryable=False))
        except (HypawareError, OSError) as exc:
            tally.retry.append(RetryPartition(part.id, self._scrub(str(exc))))
        except Exception as exc:
            # The contract: report, never raise through the driver.
            reason = self._scrub(f"unexpected {describe(exc)}")
            if not tally.unexpected:
                # A bug, not a destination failure: its traceback once per batch.
                log.error("sink %r: partition %s: %s", self.name, part.id, reason, exc_info=True)
            tally.unexpected = True
            tally.retry.append(RetryPartition(part.id, reason))
        else:
            tally.exported.append(part.id)
            tally.rows += n
            tally.size += b

    def _log_failures(self, batch: ExportBatch, retry: list[RetryPartition]) -> None:
        """One line per batch and reason (the driver warns with the same counts)."""
        by_reason: dict[str, list[str]] = {}
        for r in retry:
            by_reason.setdefault(r.reason, []).append(r.partition_id)
        for reason, ids in by_reason.items():
            more = len(ids) - 5
            log.info(
                "sink %r: dataset %s: batch %s: %d partitions not delivered (%s%s): %s",
                self.name,
                batch.dataset.name,
                batch.batch_id,
                len(ids),
                ", ".join(ids[:5]),
                f" and {more} more" if more > 0 else "",
                reason,
                extra={
                    "sink": self.name,
                    "dataset": batch.dataset.name,
                    "batch_id": batch.batch_id,
                    "partitions": len(ids),
                },
            )

    async def _export_partition(
        self,
        batch: ExportBatch,
        part: PartitionRef,
        deadline: float | None,
        opts: ExportOptions,
    ) -> tuple[int, int]:
        identity = ChunkIdentity(self.gateway, batch.sink, batch.dataset.name, part.id)
        url = self.wire.url(batch.dataset.name)
        rows = size = 0
        reader = await asyncio.to_thread(part.open)
        chunks: Iterator[Chunk] = chunk_batches(
            reader, identity, self.limits, codec=self.codec, framing=self.wire.framing
        )
        # Encoding is CPU work in a worker thread: the next chunk is encoded while
        # the current one is on the wire, and close() stays responsive meanwhile.
        upcoming = asyncio.ensure_future(asyncio.to_thread(next, chunks, None))
        try:
            while True:
                chunk = await upcoming
                if chunk is None:
                    break
                if self._abort.aborted:
                    raise WaitAbortedError("closing")
                upcoming = asyncio.ensure_future(asyncio.to_thread(next, chunks, None))
                fresh = await self._deliver(url, chunk, identity, deadline, opts)
                if fresh < chunk.rows:
                    log.debug("sink %r: endpoint already had chunk %s", self.name, chunk.id)
                rows += chunk.rows
                size += len(chunk.body)
        finally:
            # A worker thread cannot be cancelled; wait for it (one chunk at most).
            await asyncio.gather(upcoming, return_exceptions=True)
            close = getattr(reader, "close", None)
            if close is not None:
                close()
        return rows, size

    async def _deliver(
        self,
        url: str,
        chunk: Chunk,
        identity: ChunkIdentity,
        deadline: float | None,
        opts: ExportOptions,
    ) -> int:
        headers = self.wire.headers(chunk, identity)
        policy = self._policy_until(deadline)
        # Measured on the sink's clock, the one its waits advance, so a
        # fake-clock test sees waits and the deadline on one time line.
        chunk_deadline = self._clock() + self.deadline
        delivery = _ChunkDelivery(self, url, chunk, identity, headers, chunk_deadline, opts)
        return await retry_call(
            delivery.attempt,
            policy,
            sleep=self._abort,
            clock=self._clock,
            on_wait=delivery.on_wait,
            time_left=delivery.time_left,
        )

    def _policy_until(self, deadline: float | None) -> BackoffPolicy:
        """The backoff policy, its budget cut to what is left before the export's `deadline`."""
        policy = self.policy
        loop = asyncio.get_running_loop()
        if deadline is not None:
            left = max(0.0, deadline - loop.time())
            if left < policy.budget:
                policy = attrs.evolve(policy, budget=left)
        return policy

    async def _post(self, url: str, chunk: Chunk, headers: dict[str, str]) -> Reply:
        import httpx

        where = safe_url(url)
        try:
            async with self._client.stream(
                "POST", url, content=chunk.body, headers=headers
            ) as resp:
                return await read_reply(resp, where)
        except httpx.TimeoutException as exc:
            raise Backpressure(f"POST {where}: {timeout_kind(exc)}", cause="timeout") from exc
        except httpx.TransportError as exc:
            if is_tls_error(exc):
                raise PermanentRequestError(
                    f"POST {where}: TLS handshake failed: {describe(exc)}; check that the "
                    "endpoint speaks https and its certificate is trusted"
                ) from exc
            raise Backpressure(f"POST {where}: {describe(exc)}", cause="connection") from exc

    def _judge(self, reply: Reply, chunk: Chunk, url: str) -> int:
        where = safe_url(url)
        status = reply.status
        if 200 <= status < 300:
            return self.wire.check_ack(reply, chunk)
        said = self._scrub(server_message(reply.body)) if reply.body else ""
        detail = f": {said}" if said else ""
        if status in _BACKPRESSURE_STATUSES:
            raise Backpressure(
                f"endpoint answered {status}{detail}",
                retry_after=reply.headers.get("retry-after"),
                cause=f"http {status}",
            )
        if status in _LADDER_STATUSES or 500 <= status < 600:
            raise Backpressure(f"endpoint answered {status}{detail}", cause=f"http {status}")
        if status == 413:
            raise PermanentRequestError(
                f"endpoint refused chunk {chunk.index} ({chunk.rows} rows, {len(chunk.body)} "
                f"bytes) as too large (413){detail}; lower max_chunk_bytes (now "
                f"{self.limits.max_bytes}) or max_chunk_rows (now {self.limits.max_rows})",
                rows_fault=True,
            )
        if 300 <= status < 400:
            target = safe_url(reply.headers.get("location", "")) or "nowhere"
            raise PermanentRequestError(
                f"endpoint {where} redirected ({status}) to {target}; redirects are not "
                "followed so credentials stay with the configured host: configure the final URL"
            )
        hint = {
            400: "the endpoint rejected the request as malformed",
            401: "the endpoint rejected the credentials; check the token",
            403: "the credentials are not allowed to write here",
            404: f"no such endpoint or dataset at {where}",
            422: "the endpoint rejected the rows",
        }.get(status, "the endpoint refused the request")
        # 400 and 422 are about what was sent; 401, 403, 404 and the rest of the
        # 4xx are about where and as whom it was sent.
        raise PermanentRequestError(f"{hint} ({status}){detail}", rows_fault=status in (400, 422))

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


@attrs.frozen
class _ChunkDelivery:
    """The attempts `retry_call` makes at delivering one chunk of `sink`.

    `deadline` is on the sink's clock and bounds the chunk's requests and
    waits together.
    """

    sink: RequestSink
    url: str
    chunk: Chunk
    identity: ChunkIdentity
    headers: dict[str, str]
    deadline: float
    opts: ExportOptions

    def time_left(self) -> float:
        return self.deadline - self.sink._clock()

    async def attempt(self) -> int:
        """POST the chunk once and judge the reply; `on_request` hears of it either way."""
        # A wire may sign each attempt afresh (the webhook's timestamped signature).
        sent = self.sink.wire.stamp(self.headers, self.chunk, self.sink._clock())
        started_ns = time.time_ns()
        began = time.perf_counter()
        status: int | None = None
        error: str | None = None
        try:
            reply = await self._post_in_time(sent)
            status = reply.status
            return self.sink._judge(reply, self.chunk, self.url)
        except BaseException as exc:
            error = f"http {status}" if status is not None else type(exc).__name__
            raise
        finally:
            if self.opts.on_request is not None:
                self.opts.on_request(
                    RequestEvent(
                        method="POST",
                        url=safe_url(self.url),
                        status=status,
                        started_ns=started_ns,
                        seconds=time.perf_counter() - began,
                        error=error,
                    )
                )

    async def _post_in_time(self, headers: dict[str, str]) -> Reply:
        """`RequestSink._post`, cut short when the deadline passes or the sink closes."""
        try:
            async with asyncio.timeout(max(0.0, self.time_left())):
                reply = await self.sink._abort.run(self.sink._post(self.url, self.chunk, headers))
        except TimeoutError:
            raise DeadlineExceededError(
                f"chunk {self.chunk.index}: no answer from {safe_url(self.url)} within the "
                f"request deadline of {self.sink.deadline:g}s (requests and waits together)"
            ) from None
        return reply

    def on_wait(self, exc: Backpressure, seconds: float, attempt_no: int) -> None:
        if self.opts.on_retry_wait is not None:
            self.opts.on_retry_wait(seconds, exc.cause)
        log.info(
            "sink %r: chunk %d of partition %s: %s; attempt %d, retrying in %.3gs",
            self.sink.name,
            self.chunk.index,
            self.identity.partition,
            self.sink._scrub(exc.reason),
            attempt_no,
            seconds,
        )


if TYPE_CHECKING:
    from hypaware.core.contracts import Sink

    def _is_a_sink(sink: RequestSink) -> Sink:
        return sink
