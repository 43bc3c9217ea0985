"""Plugin factories for driver tests built from a config."""

from __future__ import annotations

from typing import Any

from tests.driver.helpers import ScriptedSink

BUILT: dict[str, ScriptedSink] = {}


def make_ok(config: Any, ctx: Any) -> ScriptedSink:
    sink = ScriptedSink(ctx.sink_name)
    BUILT[ctx.sink_name] = sink
    return sink


def make_broken(config: Any, ctx: Any) -> ScriptedSink:
    raise RuntimeError("cannot reach the license server")
