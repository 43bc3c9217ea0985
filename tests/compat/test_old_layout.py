"""The 0.1 module paths still import, with a warning naming the new home, until 0.3.0."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import hypaware
from hypaware._moved import GONE, MOVED, PUBLIC, REMOVED_IN
from hypaware.testing.conformance import SinkHarness, run_sink_checks


async def test_a_plugin_written_for_the_old_layout_imports_and_passes_the_suite() -> None:
    sys.modules.pop("tests.compat.old_layout_plugin", None)
    with pytest.warns(DeprecationWarning, match="moved to") as caught:
        plugin = importlib.import_module("tests.compat.old_layout_plugin")
    messages = {str(w.message) for w in caught}
    assert (
        "hypaware.resolver.BuildContext moved to hypaware.BuildContext; the old path goes in "
        f"hypaware {REMOVED_IN} (see CHANGELOG.md)"
    ) in messages
    assert any(
        m.startswith("hypaware.paths.encode_segment moved to hypaware.plugin.") for m in messages
    )
    # Each warning points at the plugin's own import line, not at hypaware.
    assert {w.filename for w in caught} == {plugin.__file__}

    store: dict[str, list[dict[str, object]]] = {}
    outcomes = await run_sink_checks(
        SinkHarness(
            make_sink=lambda: plugin.MemorySink(store),
            read_rows=lambda dataset: plugin.MemorySink(store).rows(dataset.name),
        )
    )
    failed = {o.name: o.message for o in outcomes if o.status == "failed"}
    assert failed == {}
    assert plugin.MANIFEST.config_class is plugin.MemoryConfig


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_old_name_is_the_object_at_its_new_home(old: str) -> None:
    module = importlib.import_module(f"hypaware.{old}")
    for name, home in MOVED[old].items():
        with pytest.warns(DeprecationWarning, match="the old path goes") as caught:
            value = getattr(module, name)
        assert value is getattr(importlib.import_module(home), name), f"{old}.{name}"
        (warning,) = caught
        assert f"hypaware.{old}.{name} moved to {home}.{name}" in str(warning.message)
        internal = home not in PUBLIC
        assert ("(an internal module)" in str(warning.message)) is internal
    if not hasattr(module, "__path__"):
        # A package kept its name in 0.2 and lists its own names; a shim lists the old ones.
        assert sorted(module.__all__) == sorted(MOVED[old])


def test_a_name_with_no_new_home_says_what_to_use_instead() -> None:
    for old, names in GONE.items():
        module = importlib.import_module(f"hypaware.{old}")
        for name, advice in names.items():
            with pytest.raises(ImportError, match=r"removed in 0\.2\.0") as info:
                getattr(module, name)
            assert advice in str(info.value)
    import hypaware.config

    with pytest.raises(AttributeError, match="has no attribute 'nonsense'"):
        hypaware.config.nonsense  # noqa: B018


def test_a_star_import_of_an_old_path_gets_every_name() -> None:
    namespace: dict[str, object] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec("from hypaware.config import *", namespace)
    assert set(MOVED["config"]) <= set(namespace)
    assert len(caught) == len(MOVED["config"])


def test_the_old_testing_paths_forward_to_the_suite_and_the_servers() -> None:
    import hypaware.testing.central as central
    import hypaware.testing.promises as promises
    from hypaware.testing import conformance
    from hypaware.testing.servers import central as new_central

    server = "hypaware.testing.servers.central.CentralServer (an internal module)"
    with pytest.warns(DeprecationWarning, match=re.escape(f"moved to {server}")):
        found = central.CentralServer
    assert found is new_central.CentralServer
    # A name the public suite exports is sent there, not to its internal module.
    with pytest.warns(
        DeprecationWarning, match=r"moved to hypaware\.testing\.conformance\.Promise;"
    ):
        found = promises.Promise
    assert found is conformance.Promise
    assert PUBLIC == ("hypaware", "hypaware.plugin", "hypaware.testing.conformance")


def test_hypaware_plugin_stays_light() -> None:
    code = (
        "import sys, hypaware.plugin as p\n"
        "heavy = [m for m in ('pyarrow', 'pyiceberg', 'obstore', 'httpx') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "assert sorted(p.__all__) == sorted(set(p.__all__))\n"
        "for name in p.__all__: getattr(p, name)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_upgrade_page_lists_every_old_path_and_the_changelog_heads_with_this_version() -> None:
    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "upgrading.md").read_text()
    missing = [old for old in sorted(MOVED) if f"| `hypaware.{old}` |" not in page]
    assert missing == []
    changelog = (root / "CHANGELOG.md").read_text()
    first = next(line for line in changelog.splitlines() if line.startswith("## "))
    assert first.split()[1] == hypaware.__version__.removesuffix(".dev0")
