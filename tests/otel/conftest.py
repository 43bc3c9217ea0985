from __future__ import annotations

from collections.abc import Iterator

import pytest

from .helpers import Telemetry


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    t = Telemetry()
    yield t
    t.close()
