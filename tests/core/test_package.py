from __future__ import annotations

import json
import subprocess
import sys

import hypaware
from hypaware.core import contracts, errors, types

HEAVY = ("pyarrow", "pyiceberg", "httpx", "obstore", "croniter", "fastparquet")


def test_import_is_light() -> None:
    code = (
        "import sys, json, hypaware;"
        "hypaware.load_config; hypaware.resolve; hypaware.DatasetInfo; hypaware.Sink;"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(proc.stdout) == []


def test_all_names_resolve() -> None:
    for name in hypaware.__all__:
        assert getattr(hypaware, name) is not None, name
    assert sorted(hypaware.__all__) == hypaware.__all__


def test_all_lists_every_public_name_of_the_core_modules() -> None:
    for module in (contracts, errors, types):
        public = {n for n in vars(module) if not n.startswith("_")}
        exported = set(module.__all__)
        assert exported <= public
        assert exported <= set(hypaware.__all__), module.__name__


def test_error_tree() -> None:
    assert issubclass(errors.NotFoundError, FileNotFoundError)
    assert issubclass(errors.AlreadyExistsError, FileExistsError)
    assert issubclass(errors.PermissionDeniedError, PermissionError)
    assert issubclass(errors.PathError, ValueError)
    for name in errors.__all__:
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, errors.HypawareError)
