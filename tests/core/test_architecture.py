"""The package's layout is a rule, not a habit: rooms only, and no import circles.

The layer order itself is checked by ``lint-imports`` (pyproject.toml's
``[tool.importlinter]``) in the lint session; these tests catch what that
contract does not: a circle between two modules of one room, and a module
left loose at the top of the package.
"""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

import hypaware
from hypaware._moved import GONE, MOVED

PACKAGE = Path(hypaware.__file__).parent
TOP_LEVEL = {"__init__.py", "__main__.py", "_version.py", "py.typed", "plugin.py", "_moved.py"}
# The 0.1 module paths: each only forwards to its 0.2 home (hypaware/_moved.py). A key
# is the path under hypaware/ ("testing.central" is hypaware/testing/central.py).
SHIMS = {f"{old.replace('.', '/')}.py" for old in (*MOVED, *GONE)} - {"cache.py", "querying.py"}


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("hypaware", include_external_packages=False)


def test_no_module_imports_itself_back(graph: grimp.ImportGraph) -> None:
    assert _cycles(graph) == []


def test_the_cycle_finder_sees_a_circle() -> None:
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    assert _cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_only_rooms_at_the_top_of_the_package() -> None:
    loose = sorted(
        p.name
        for p in PACKAGE.iterdir()
        if p.is_file() and p.name not in TOP_LEVEL | SHIMS and not p.name.endswith(".pyc")
    )
    assert loose == []
    for shim in sorted(SHIMS):
        code = [
            line
            for line in (PACKAGE / shim).read_text().splitlines()
            if line and not line.startswith(('"""', "from hypaware._moved import"))
        ]
        assert set(code) <= {"__all__ = names(__name__)", "__getattr__ = forward(__name__)"}, shim
    for room in (p for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert (room / "__init__.py").is_file(), room.name
        doc = (room / "__init__.py").read_text()
        assert doc.startswith('"""'), f"{room.name}/__init__.py says what the room holds"


def test_the_testing_room_holds_the_suite_the_servers_and_their_old_paths() -> None:
    # The public conformance suite and the internal loopback servers are two packages;
    # a module beside them is only a 0.1 path forwarding into one of them.
    testing = PACKAGE / "testing"
    packages = sorted(p.name for p in testing.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert packages == ["conformance", "servers"]
    loose = sorted(
        p.name
        for p in testing.glob("*.py")
        if p.name != "__init__.py" and f"testing/{p.name}" not in SHIMS
    )
    assert loose == []
    # The peers install azurite into the checkout's .peers/, wherever their module sits.
    from hypaware.testing.servers.peers import PEERS_DIR

    assert PACKAGE.parent / ".peers" == PEERS_DIR


def test_plugin_modules_only_wire_manifests() -> None:
    # A plugin module names a manifest and a factory; behaviour lives in the rooms below.
    for module in sorted((PACKAGE / "plugins").glob("*.py")):
        if module.name == "__init__.py":
            continue
        text = module.read_text()
        assert "MANIFEST = PluginManifest(" in text, module.name
        assert "class " not in text, f"{module.name} defines a class; move it below plugins/"
