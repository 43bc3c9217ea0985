"""Any input a config can be given ends in a `ConfigError`, never another exception.

Files of any bytes, documents of any shape and type, names with NUL, ``..`` or
hundreds of characters: `load_config`, `resolve` and `check_config` raise
`ConfigError` (or succeed), and every CLI command exits 2 on what they refuse,
without a traceback and without creating anything next to the config.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hypaware import ConfigError, load_config, resolve
from hypaware.cli import main
from hypaware.core.checks import check_config
from hypaware.core.config_json import MAX_DEPTH
from hypaware.core.registry import Registry

REGISTRY = Registry.from_entry_points()
PLUGINS = sorted(REGISTRY)
KEYS = sorted(
    {
        a.alias
        for m in REGISTRY.values()
        if m.config_class is not None
        for a in attrs.fields(m.config_class)
    }
    | {"schedule", "datasets", "max_batch_rows", "max_batch_bytes", "export_timeout"}
)

leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**30, max_value=10**40)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["", "\x00", "..", "*/5 * * * *", "http://x", "${NOPE}", "a" * 300])
)
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
names = (
    st.text(max_size=8)
    | st.sampled_from([".", "..", "a/b", " pad", "ok"])
    | st.text(min_size=1, max_size=4).map(lambda s: s + "\x00" + s)
    | st.integers(min_value=190, max_value=400).map(lambda n: "s" * n)
)
paths = names | st.text(max_size=20) | st.just("a/" + "d" * 300)
plugin_names = st.sampled_from(PLUGINS) | st.text(max_size=10) | values
plugin_config = st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), values, max_size=5)
sink_entries = st.fixed_dictionaries(
    {},
    optional={
        "writer": plugin_names,
        "destination": plugin_names,
        "plugin": plugin_names,
        "encoder": plugin_names,
        "config": plugin_config | values,
        "extra": values,
    },
)
documents = (
    st.fixed_dictionaries(
        {},
        optional={
            "sinks": st.dictionaries(names, sink_entries | values, max_size=3) | values,
            "cache": st.fixed_dictionaries(
                {},
                optional={
                    "path": paths | values,
                    "retention_hours": values,
                    "max_bytes": values,
                    "max_age_hours": values,
                },
            )
            | values,
            "state_dir": paths | values,
            "stray": values,
        },
    )
    | values
)


def _refused_or_fine(source: Any) -> None:
    with contextlib.suppress(ConfigError):
        load_config(source)
    with contextlib.suppress(ConfigError):
        resolve(source, REGISTRY)
    with contextlib.suppress(ConfigError):
        check_config(source, REGISTRY)


@settings(max_examples=2000, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_any_document_in_process_is_a_config_error_or_a_config(doc: Any) -> None:
    _refused_or_fine(doc)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200) | documents.map(lambda d: json.dumps(d).encode()))
@example(b'{"":"${"}')  # a problem under an empty top-level key still has a path
def test_any_file_is_a_config_error_or_a_config(data: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hypaware.json"
        path.write_bytes(data)
        failure = None
        try:
            load_config(path)
        except ConfigError as exc:
            failure = exc
        # Each problem has a key path, or names the file it could not read.
        if failure is not None:
            for problem in failure.problems:
                assert problem.path or str(path) in problem.message or "key" in problem.message
        _refused_or_fine(path)


def _mutations(text: str) -> st.SearchStrategy[str]:
    return st.tuples(
        st.integers(0, len(text)),
        st.integers(0, 3),
        st.text(alphabet='{}[]",:\\0a\x00 ', max_size=3),
    ).map(lambda t: text[: t[0]] + t[2] + text[t[0] + t[1] :])


VALID = json.dumps(
    {
        "state_dir": "state",
        "sinks": {
            "local": {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/local-fs",
                "config": {"root": "export", "schedule": "0 * * * *"},
            }
        },
    }
)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations(VALID))
def test_a_damaged_file_is_a_config_error_or_a_config(text: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hypaware.json"
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        _refused_or_fine(path)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[" * 100_000, "nested"),
        ('{"sinks": ' * 40 + "{}" + "}" * 40, "nested"),
        ('{"state_dir": ' + "9" * 5000 + "}", "usable"),
        ('{"cache": {"max_bytes": NaN}}', "NaN"),
        ('{"cache": {"retention_hours": 1e999}}', "too large"),
        ('{"x": 1, "x": 2}', "duplicate"),
        ("", "not valid JSON"),
    ],
)
def test_malformed_json_names_the_file(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert says in str(exc.value)
    if says != "duplicate":
        assert str(path) in str(exc.value)


def test_bytes_that_are_not_utf8_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(b'{"state_dir": "\xff\xfe"}')
    with pytest.raises(ConfigError, match="not UTF-8") as exc:
        load_config(path)
    assert str(path) in str(exc.value)


def test_load_config_says_what_it_takes() -> None:
    with pytest.raises(ConfigError, match=r"a path to a \.toml or \.json file or a mapping"):
        load_config(42)  # type: ignore[arg-type]
    deep: Any = {}
    for _ in range(MAX_DEPTH + 5):
        deep = {"a": deep}
    with pytest.raises(ConfigError, match="nested more than"):
        load_config({"sinks": deep})


@pytest.mark.parametrize(
    ("doc", "path", "says"),
    [
        ({"state_dir": "st\x00ate"}, "state_dir", "NUL"),
        ({"cache": {"path": "ca\x00che"}}, "cache.path", "NUL"),
        ({"cache": {"path": "c/" + "x" * 300}}, "cache.path", "longer than 255"),
        ({"sinks": {"a\x00b": {"plugin": "@hypaware/webhook"}}}, "sinks.a\x00b", "NUL"),
        ({"sinks": {"s" * 300: {"plugin": "@hypaware/webhook"}}}, "sinks." + "s" * 300, "bytes"),
        ({"sinks": {"..": {"plugin": "@hypaware/webhook"}}}, "sinks...", "reserved"),
    ],
)
def test_names_and_paths_the_os_would_refuse_are_refused(
    doc: dict[str, Any], path: str, says: str
) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(doc)
    assert any(p.path == path and says in p.message for p in exc.value.problems), exc.value


# ------------------------------------------------------------------ the CLI

COMMANDS = [
    ["check-config"],
    ["status"],
    ["export", "--once"],
    ["query", "conversation_events"],
]


@settings(
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(doc=documents)
def test_every_command_exits_2_on_a_refused_config(
    doc: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    try:
        check_config(doc, REGISTRY)
    except ConfigError:
        pass
    else:
        return
    root = tmp_path_factory.mktemp("cli")
    config = root / "hypaware.json"
    config.write_text(json.dumps(doc))
    for command in COMMANDS:
        assert main([command[0], "--config", str(config), *command[1:]]) == 2, command
    assert sorted(p.name for p in root.iterdir()) == ["hypaware.json"], "a command touched state"


def test_commands_print_no_traceback_for_malformed_files(tmp_path: Path) -> None:
    bad = {
        "deep.json": "[" * 100_000,
        "huge.json": '{"cache": {"max_bytes": ' + "1" * 5000 + "}}",
        "binary.json": "\x00\x01\x02",
        "nul.json": json.dumps({"state_dir": "a\x00b"}),
    }
    for name, text in bad.items():
        (tmp_path / name).write_text(text)
    for name in bad:
        for command in COMMANDS:
            argv = [command[0], "--config", str(tmp_path / name), *command[1:]]
            proc = subprocess.run(
                [sys.executable, "-m", "hypaware", *argv],
                capture_output=True,
                text=True,
                check=False,
                timeout=120,
            )
            assert proc.returncode == 2, (argv, proc.stderr)
            assert "Traceback" not in proc.stderr, proc.stderr
            assert proc.stderr.startswith(f"hypaware {command[0]}: error: "), proc.stderr
            assert name in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(bad)
