"""A synthetic, realistic dataset for trying hypaware out: conversation events.

`seed_demo_cache` fills a `LocalCache` with a few days of conversations
between users and assistants (turns, tool calls, token counts, latencies),
partitioned the way a capture daemon would: by conversation and by hour.
The data is generated from a seed, so a given seed and end time always give
the same rows.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from hypaware.cache.local import LocalCache
from hypaware.core.types import DatasetInfo

__all__ = [
    "DEMO_DATASET",
    "DemoSeed",
    "demo_config",
    "demo_dataset_info",
    "seed_demo_cache",
]

DEMO_DATASET = "conversation_events"

_MODELS = ("claude-sonnet", "claude-haiku", "gpt-4o", "llama-3-70b")
_TOOLS = ("web_search", "read_file", "run_sql", "calendar", None, None, None)
_TOPICS = (
    "quarterly report",
    "flight to Lisbon",
    "failing CI job",
    "SQL query tuning",
    "birthday present",
    "lease renewal",
    "onboarding checklist",
    "customer refund",
)


def demo_dataset_info() -> DatasetInfo:
    """The demo dataset: one row per conversation event."""
    import pyarrow as pa

    schema = pa.schema(
        [
            pa.field("event_id", pa.string(), nullable=False),
            pa.field("conversation_id", pa.string(), nullable=False),
            pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("turn", pa.int32()),
            pa.field("role", pa.string()),
            pa.field("model", pa.string()),
            pa.field("tool", pa.string()),
            pa.field("tokens_in", pa.int32()),
            pa.field("tokens_out", pa.int32()),
            pa.field("latency_ms", pa.int32()),
            pa.field("text", pa.string()),
        ]
    )
    return DatasetInfo(
        name=DEMO_DATASET,
        schema=schema,
        time_column="ts",
        lookup_key="conversation_id",
        partition_by=("conversation_id",),
        time_grain="hour",
    )


@attrs.frozen
class DemoSeed:
    """What `seed_demo_cache` wrote."""

    rows: int
    conversations: int
    partitions: int
    start: datetime
    end: datetime


def _events(rng: random.Random, start: datetime, days: int, per_day: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    n = 0
    for day in range(days):
        for c in range(per_day):
            conv = f"conv-{day:02d}{c:03d}-{rng.randrange(16**6):06x}"
            model = rng.choice(_MODELS)
            topic = rng.choice(_TOPICS)
            t = start + timedelta(days=day, seconds=rng.randrange(0, 86_000))
            for turn in range(rng.randint(3, 24)):
                role = "user" if turn % 2 == 0 else "assistant"
                tool = rng.choice(_TOOLS) if role == "assistant" else None
                tokens_in = rng.randint(20, 900) if role == "user" else rng.randint(200, 4000)
                rows.append(
                    {
                        "event_id": f"evt-{n:07d}",
                        "conversation_id": conv,
                        "ts": t,
                        "turn": turn,
                        "role": role,
                        "model": model,
                        "tool": tool,
                        "tokens_in": tokens_in,
                        "tokens_out": 0 if role == "user" else rng.randint(30, 1500),
                        "latency_ms": 0 if role == "user" else rng.randint(250, 9000),
                        "text": f"{role} turn {turn} about the {topic}",
                    }
                )
                n += 1
                t += timedelta(seconds=rng.randint(5, 900))
    return rows


def seed_demo_cache(
    cache: LocalCache,
    *,
    days: int = 3,
    conversations_per_day: int = 24,
    end: datetime | None = None,
    seed: int = 14,
) -> DemoSeed:
    """Define the demo dataset in `cache`, append `days` days of events ending at `end`, seal.

    `end` defaults to the start of the current hour (UTC).
    """
    if end is None:
        end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(days=days)
    info = cache.define_dataset(demo_dataset_info())
    events = _events(random.Random(seed), start, days, conversations_per_day)
    rows = [r for r in events if r["ts"] < end]
    cache.append(info.name, rows)
    sealed = cache.seal(info.name)
    return DemoSeed(
        rows=len(rows),
        conversations=len({r["conversation_id"] for r in rows}),
        partitions=len(sealed),
        start=start,
        end=end,
    )


def demo_config() -> dict[str, Any]:
    """The demo's config document: the embedded cache and one local Parquet sink.

    Paths are relative, so they are taken from the directory the file is
    written to.
    """
    return {
        "state_dir": "state",
        "cache": {"path": "cache"},
        "sinks": {
            "local": {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/local-fs",
                "config": {"root": "export", "schedule": "*/5 * * * *"},
            }
        },
    }
