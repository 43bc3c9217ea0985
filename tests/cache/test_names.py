"""Every `LocalCache` entry point refuses a dataset or partition name that could leave the cache.

The setup is the hole this closes: another directory next to the cache holds
a real dataset, and a name like ``../other/events`` would reach it.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypaware.cache.local import LocalCache
from hypaware.core.errors import CacheError
from tests.driver.helpers import events_info, make_cache, rows

RULE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")

traversals = st.sampled_from(
    [
        "../other/events",
        "../../../../other/events",
        "/abs/events",
        "events/../../other/events",
        "a/b",
        ".",
        "..",
        "",
        ".hidden",
        "-dash",
        "events\n",
        "events\x00",
        "x" * 129,
    ]
)
bad_names = st.one_of(traversals, st.text(max_size=40).filter(lambda n: not RULE.fullmatch(n)))


def snapshot(directory: Path) -> dict[str, int]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            out[str(path.relative_to(directory))] = path.lstat().st_size
    return out


ENTRY_POINTS: dict[str, Callable[[LocalCache, str], Any]] = {
    "append": lambda c, n: c.append(n, rows(0, 3)),
    "seal": lambda c, n: c.seal(n),
    "dataset": lambda c, n: c.dataset(n),
    "has_dataset": lambda c, n: c.has_dataset(n),
    "ready_partitions": lambda c, n: c.ready_partitions(n),
    "partition": lambda c, n: c.partition(n, "000000000001-c0"),
    "define_dataset": lambda c, n: c.define_dataset(events_info(n)),
}


@settings(max_examples=60, deadline=None)
@given(name=bad_names, entry=st.sampled_from(sorted(ENTRY_POINTS)))
def test_a_bad_dataset_name_is_refused_everywhere(name: str, entry: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        # A real dataset outside the cache, where "../other/events" points.
        make_cache(base / "other", count=6)
        cache = LocalCache(base / "cache" / "inner", fsync=False)
        cache.define_dataset(events_info())
        before = snapshot(base / "other")
        if entry == "define_dataset":
            try:
                events_info(name)
            except ValueError:
                return  # DatasetInfo itself refuses it, before any cache sees it
        with pytest.raises(CacheError, match="dataset name") as info:
            ENTRY_POINTS[entry](cache, name)
        assert repr(name)[:30] in str(info.value) or name == ""
        assert snapshot(base / "other") == before
        assert sorted(os.listdir(base / "cache" / "inner")) == ["cache-id", "events"]


@settings(max_examples=40, deadline=None)
@given(
    pid=st.one_of(
        st.sampled_from(
            [
                "../../../other/events/sealed/000000000001-c0",
                "000000000001-c0/../../x",
                "000000000001-c0\n",
                "1-c0",
                "",
            ]
        ),
        st.text(max_size=30).filter(lambda p: not re.fullmatch(r"\d{12}-[A-Za-z0-9_-]+", p)),
    )
)
def test_a_bad_partition_id_is_refused(pid: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cache = make_cache(Path(tmp) / "cache", count=6)
        with pytest.raises(CacheError, match="partition id"):
            cache.partition("events", pid)


def test_the_reported_escape_writes_nothing(tmp_path: Path) -> None:
    make_cache(tmp_path / "other", count=6)
    cache = LocalCache(tmp_path / "a" / "b" / "c" / "d", fsync=False)
    before = snapshot(tmp_path / "other")
    with pytest.raises(CacheError, match=r"'\.\./\.\./\.\./\.\./other/events'"):
        cache.append("../../../../other/events", rows(0, 3))
    with pytest.raises(CacheError):
        cache.seal("../../../../other/events")
    assert snapshot(tmp_path / "other") == before
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").rglob("*.arrow"))
    shutil.rmtree(tmp_path / "other")
