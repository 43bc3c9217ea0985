"""Fixtures for the request-sink tests: the reference central server on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hypaware.testing.servers.central import CentralServer

TOKEN = "e2e-token-5a4b3c2d1e"


@pytest.fixture
def central() -> Iterator[CentralServer]:
    with CentralServer(token=TOKEN) as server:
        yield server
