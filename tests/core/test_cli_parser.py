"""The command line: one command's run imports that command's module, not every command's."""

from __future__ import annotations

import subprocess
import sys

from hypaware.cli import COMMANDS, make_parser

PROBE = """
import sys
from hypaware.cli import main
main(["plugins"])
print(sorted(m for m in sys.modules if m.startswith("hypaware.cli.") and m.count(".") == 2))
"""


def test_running_one_command_imports_only_its_module() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout
    loaded = out.strip().splitlines()[-1]
    assert "'hypaware.cli.plugins'" in loaded
    for other in ("query", "demo", "status", "export"):
        assert f"'hypaware.cli.{other}'" not in loaded


def test_the_full_parser_still_knows_every_command() -> None:
    parser = make_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sorted(sub.choices) == sorted(n.replace("_", "-") for n in COMMANDS)  # type: ignore[attr-defined]
    assert list(make_parser(only="status")._actions[-1].choices) == ["status"]  # type: ignore[attr-defined]
