"""The request sinks pass hypaware's sink conformance suite against real loopback servers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from hypaware import build, resolve
from hypaware.core.contracts import Sink
from hypaware.core.types import DatasetInfo
from hypaware.testing.conformance import SinkContract
from hypaware.testing.servers.central import CentralServer, RateLimit
from hypaware.testing.servers.webhook import WebhookReceiver, run_webhook_receiver
from tests.timing import PROMPT

from .conftest import TOKEN
from .test_webhook import KEY


def _build(plugin: str, config: dict[str, Any], env: dict[str, str]) -> Sink:
    (plan,) = resolve({"sinks": {"s": {"plugin": plugin, "config": config}}})
    sink = build(plan, env=env)
    assert isinstance(sink, Sink)
    return sink


class TestCentralConformance(SinkContract):
    secrets = (TOKEN,)
    close_timeout = PROMPT

    @pytest.fixture
    def target(self) -> Iterator[CentralServer]:
        with CentralServer(token=TOKEN) as server:
            yield server

    def make_sink(self, target: CentralServer) -> Sink:
        config = {"endpoint": target.url, "token": "${TOK}", "gateway_id": "gw-conf"}
        return _build("@hypaware/central", config, {"TOK": TOKEN})

    def read_rows(self, target: CentralServer, dataset: DatasetInfo) -> list[dict[str, Any]]:
        return target.rows(dataset.name)

    @contextlib.asynccontextmanager
    async def _stalled(self, target: CentralServer) -> AsyncIterator[None]:
        target.rate_limit = RateLimit(requests=0, retry_after="30")
        try:
            yield
        finally:
            target.rate_limit = None

    def stall(self, target: CentralServer) -> contextlib.AbstractAsyncContextManager[None]:
        return self._stalled(target)


class TestWebhookConformance(SinkContract):
    secrets = (KEY,)
    close_timeout = PROMPT

    @pytest.fixture
    def target(self) -> Iterator[WebhookReceiver]:
        with run_webhook_receiver(KEY) as receiver:
            yield receiver

    def make_sink(self, target: WebhookReceiver) -> Sink:
        config = {"url": target.url, "signing_secret": "${KEY}", "gateway_id": "gw-conf"}
        return _build("@hypaware/webhook", config, {"KEY": KEY})

    def read_rows(self, target: WebhookReceiver, dataset: DatasetInfo) -> list[dict[str, Any]]:
        with target.lock:
            return list(target.rows.get(dataset.name, ()))

    @contextlib.asynccontextmanager
    async def _stalled(self, target: WebhookReceiver) -> AsyncIterator[None]:
        with target.lock:
            target.script.extend([(503, "30")] * 50)
        try:
            yield
        finally:
            with target.lock:
                target.script.clear()

    def stall(self, target: WebhookReceiver) -> contextlib.AbstractAsyncContextManager[None]:
        return self._stalled(target)
