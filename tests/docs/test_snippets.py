"""Every Python example in the user manual runs, so the docs cannot rot.

For each page ``docs/*.md``, the fenced blocks whose info string is
``python`` run in order, in one namespace (a later block may use what an
earlier one defined), in a fresh temporary working directory, with top-level
``await`` allowed (it runs on one event loop per page). A block fails the
page's test with its page and line.

Every ``json`` block must parse; one holding a whole configuration (a
top-level ``"sinks"`` object), JSON or TOML, must also pass every check of
``hypaware check-config`` (plugin keys included) when every plugin it names
is installed.

The only way to keep a block from running is an explicit marker on the line
right before its fence, saying why::

    <!-- docs-test: skip (needs a real AWS account) -->

It is invisible in the rendered page. Use it sparingly: for an example that
needs something the test run cannot have.
"""

from __future__ import annotations

import ast
import asyncio
import json
import re
import sys
import types
from pathlib import Path
from typing import Any

import attrs
import pytest

import hypaware

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md"))
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
REGISTRY = hypaware.Registry.from_entry_points()
SKIP = re.compile(r"^\s*<!--\s*docs-test:\s*skip\b(?P<why>.*?)-->\s*$")


@attrs.frozen
class Block:
    page: str
    line: int  # 1-based line of the first line of code
    lang: str
    code: str
    skip: str | None


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, with their language and skip marker."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        lang = m["info"].strip().split(" ")[0].lower() if m["info"].strip() else ""
        skip = None
        if i > 0:
            marker = SKIP.match(lines[i - 1])
            if marker is not None:
                skip = marker["why"].strip(" ()") or "no reason given"
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            end = lines[j].strip()
            if end.startswith(fence[0] * len(fence)) and set(end) == {fence[0]}:
                break
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        out.append(Block(path.name, i + 2, lang, "\n".join(body) + "\n", skip))
        i = j + 1
    return out


# Pages whose examples are still fragments (they use names no block of the
# page defines). Each is expected to fail with exactly this error until its
# examples are made self-contained; then its entry goes.
NOT_YET_RUNNABLE: dict[str, tuple[type[BaseException], str]] = {}


def page_blocks(lang: str) -> list[Any]:
    params = []
    for page in PAGES:
        found = [b for b in blocks(page) if b.lang == lang]
        if not found:
            continue
        marks = []
        if lang == "python" and page.name in NOT_YET_RUNNABLE:
            error, why = NOT_YET_RUNNABLE[page.name]
            marks.append(pytest.mark.xfail(raises=error, reason=why, strict=False))
        params.append(pytest.param(found, id=page.name, marks=marks))
    return params


def run_block(block: Block, namespace: dict[str, Any], loop: asyncio.AbstractEventLoop) -> None:
    # Leading blank lines keep tracebacks pointing at the page's own line numbers.
    source = "\n" * (block.line - 1) + block.code
    # dont_inherit: this module's own __future__ imports must not leak into the examples.
    code = compile(
        source,
        str(DOCS / block.page),
        "exec",
        flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
        dont_inherit=True,
    )
    result = eval(code, namespace)
    if asyncio.iscoroutine(result):
        loop.run_until_complete(result)


@pytest.mark.parametrize("found", page_blocks("python"))
def test_python_examples_run(
    found: list[Block], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # A real module, so classes defined in an example resolve their annotations like any other.
    module = types.ModuleType(f"docs_{found[0].page.removesuffix('.md').replace('-', '_')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    loop = asyncio.new_event_loop()
    try:
        for block in found:
            if block.skip is None:
                run_block(block, module.__dict__, loop)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


@pytest.mark.parametrize("found", page_blocks("json"))
def test_json_examples_parse(found: list[Block]) -> None:
    for block in found:
        if block.skip is not None:
            continue
        where = f"{block.page}:{block.line}"
        try:
            doc = json.loads(block.code)
        except json.JSONDecodeError as exc:
            pytest.fail(f"{where}: not valid JSON: {exc}")
        if isinstance(doc, dict) and isinstance(doc.get("sinks"), dict):
            try:
                config = hypaware.load_config(doc)
                if _named_plugins(config) <= set(REGISTRY):
                    hypaware.resolve(config, REGISTRY)
            except hypaware.ConfigError as exc:
                pytest.fail(f"{where}: the example config does not resolve:\n{exc}")


def _named_plugins(config: hypaware.HypawareConfig) -> set[str]:
    names = set()
    for spec in config.sinks:
        names.update(n for n in (spec.writer, spec.destination, spec.plugin, spec.encoder) if n)
    return names


def test_the_snippet_reader_finds_blocks_and_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n```python\nx = 1\n```\n\n<!-- docs-test: skip (needs a cloud account) -->\n"
        "```python\nraise SystemExit\n```\n\n~~~json\n{}\n~~~\n"
    )
    found = blocks(page)
    assert [(b.lang, b.line, b.code, b.skip) for b in found] == [
        ("python", 4, "x = 1\n", None),
        ("python", 9, "raise SystemExit\n", "needs a cloud account"),
        ("json", 13, "{}\n", None),
    ]


def test_every_page_is_linked_from_the_index() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    missing = [p.name for p in PAGES if p.name != "index.md" and f"({p.name}" not in index]
    assert missing == [], f"docs/index.md does not link {missing}"


def _config_blocks() -> list[Any]:
    params = []
    for page in PAGES:
        for block in blocks(page):
            if block.skip is not None or block.lang not in ("json", "toml"):
                continue
            if block.lang == "json":
                try:
                    doc = json.loads(block.code)
                except json.JSONDecodeError:
                    continue  # test_json_examples_parse names it
            else:
                import tomllib

                try:
                    doc = tomllib.loads(block.code)
                except tomllib.TOMLDecodeError as exc:
                    doc = {"sinks": {}, "_unparsable": str(exc)}
            if isinstance(doc, dict) and isinstance(doc.get("sinks"), dict):
                params.append(pytest.param(block, id=f"{block.page}:{block.line}"))
    return params


@pytest.mark.parametrize("block", _config_blocks())
def test_config_examples_pass_check_config(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every whole config in the manual, JSON or TOML, passes `check-config`'s checks.

    Plugin keys included: a sink's `config` with a wrong or missing key fails
    here, naming the page and line. Secrets read from the environment are set
    to a stand-in, as a reader would before running the example.
    """
    from hypaware.core.checks import check_config

    for name in set(re.findall(r"\$\{([A-Z0-9_]+)\}", block.code)):
        monkeypatch.setenv(name, "stand-in-secret")
    monkeypatch.chdir(tmp_path)
    path = tmp_path / f"example.{block.lang}"
    path.write_text(block.code, encoding="utf-8")
    config = hypaware.load_config(path)
    if not _named_plugins(config) <= set(REGISTRY):
        pytest.skip(f"{block.page}:{block.line} names a plugin this run has not installed")
    try:
        check_config(path, REGISTRY)
    except (hypaware.ConfigError, hypaware.PluginError) as exc:
        pytest.fail(f"{block.page}:{block.line}: the example config fails check-config:\n{exc}")
