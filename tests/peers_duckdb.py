"""DuckDB's iceberg extension as an independent reader of Iceberg tables.

The extension is built for duckdb 1.5.5 only, while the test environment has
duckdb 2.x, so the reader lives in its own virtualenv, ``.peers/duckdb``, with
``duckdb==1.5.5`` and the PyPI packages that ship the extension binaries
(``duckdb-extension-iceberg``, ``-avro`` which iceberg needs, ``-httpfs`` for
``s3://``). Each package holds one file,
``duckdb_extension_<name>/extensions/v1.5.5/<name>.duckdb_extension``, which
the reader ``LOAD``s by path, with autoinstall/autoload off: nothing is
downloaded at run time.

`DuckDBIceberg.scan` runs ``SELECT * FROM iceberg_scan(...)`` in a child
process of that venv's python and hands the rows back as a ``pyarrow.Table``
through an Arrow IPC file. The ``duckdb_iceberg`` fixture is in ``tests/conftest.py``;
``.ci/run`` builds the venv, and the fixture builds it when it is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.ipc

__all__ = [
    "DUCKDB_PEER_DIR",
    "DUCKDB_REQUIREMENTS",
    "DuckDBIceberg",
    "duckdb_peer_python",
    "install_duckdb_peer",
    "s3_of",
]

DUCKDB_PEER_DIR = Path(__file__).resolve().parents[1] / ".peers" / "duckdb"
DUCKDB_VERSION = "1.5.5"
DUCKDB_REQUIREMENTS = (
    f"duckdb=={DUCKDB_VERSION}",
    f"duckdb-extension-iceberg=={DUCKDB_VERSION}",
    f"duckdb-extension-avro=={DUCKDB_VERSION}",
    f"duckdb-extension-httpfs=={DUCKDB_VERSION}",
    "pyarrow",
)
EXTENSIONS = ("avro", "httpfs", "iceberg")  # load order: iceberg needs avro (and httpfs for S3)
SCAN_TIMEOUT = 120.0
INSTALL_TIMEOUT = 600.0

# Runs in the peer venv: argv[1] is a JSON request, the rows go to request["out"].
_SCAN_SCRIPT = """
import importlib, json, sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.ipc

req = json.loads(sys.argv[1])
con = duckdb.connect(config={
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
})
for name in req["extensions"]:
    package = importlib.import_module("duckdb_extension_" + name)
    (path,) = Path(package.__file__).parent.glob("extensions/*/" + name + ".duckdb_extension")
    con.load_extension(str(path))
con.execute("SET TimeZone = 'UTC'")
s3 = req.get("s3")
if s3:
    def q(value):
        return "'" + str(value).replace("'", "''") + "'"
    con.execute(
        f"CREATE SECRET peer_s3 (TYPE s3, KEY_ID {q(s3['key_id'])}, SECRET {q(s3['secret'])},"
        f" ENDPOINT {q(s3['endpoint'])}, REGION {q(s3['region'])}, URL_STYLE 'path',"
        f" USE_SSL {'true' if s3['use_ssl'] else 'false'})"
    )
table = con.execute("SELECT * FROM iceberg_scan(?)", [req["location"]]).to_arrow_table()
with pa.OSFile(req["out"], "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
    writer.write_table(table)
"""

_PROBE_SCRIPT = (
    "import duckdb, pyarrow, duckdb_extension_iceberg, duckdb_extension_avro, duckdb_extension_httpfs"
    f"\nassert duckdb.__version__ == {DUCKDB_VERSION!r}, duckdb.__version__"
)


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def duckdb_peer_python(venv: Path = DUCKDB_PEER_DIR) -> Path | None:
    """The peer venv's python if it has duckdb 1.5.5 and the extensions, else None.

    ``$HYPAWARE_DUCKDB_PYTHON`` names another interpreter to use instead.
    """
    explicit = os.environ.get("HYPAWARE_DUCKDB_PYTHON")
    python = Path(explicit) if explicit else _venv_python(venv)
    if not python.exists():
        return None
    try:
        probe = subprocess.run(
            [str(python), "-c", _PROBE_SCRIPT],
            capture_output=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return python if probe.returncode == 0 else None


def install_duckdb_peer(
    venv: Path = DUCKDB_PEER_DIR, *, timeout: float = INSTALL_TIMEOUT
) -> tuple[Path | None, str]:
    """(Re)build the peer venv with pip; returns (its python or None, what went wrong)."""
    base = shutil.which("python3") or sys.executable
    steps = [
        [base, "-m", "venv", "--clear", str(venv)],
        [
            str(_venv_python(venv)),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *DUCKDB_REQUIREMENTS,
        ],
    ]
    venv.parent.mkdir(parents=True, exist_ok=True)
    for step in steps:
        try:
            proc = subprocess.run(
                step,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return None, f"{' '.join(step[:4])} timed out after {timeout:.0f}s"
        except OSError as exc:
            return None, f"{' '.join(step[:4])}: {exc}"
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
            return None, f"{' '.join(step[:4])} failed ({proc.returncode}):\n{tail}"
    python = duckdb_peer_python(venv)
    if python is None:
        return None, f"{venv} was built but cannot import duckdb {DUCKDB_VERSION} and extensions"
    return python, ""


@attrs.frozen
class DuckDBIceberg:
    """Reads Iceberg tables with DuckDB's ``iceberg_scan`` in the peer venv's python."""

    python: Path
    timeout: float = SCAN_TIMEOUT

    def scan(self, metadata_location: str, *, s3: dict[str, Any] | None = None) -> pa.Table:
        """``SELECT * FROM iceberg_scan(metadata_location)``: all rows of the table's snapshot.

        `metadata_location` is a ``*.metadata.json`` path or URL (``file://``,
        ``s3://``). For S3 pass `s3` with ``endpoint`` (``http://host:port`` or
        ``host:port``), ``access_key_id``, ``secret_access_key`` and
        ``region`` (e.g. ``S3Peer``'s fields; see `s3_of`).
        """
        with tempfile.TemporaryDirectory(prefix="duckdb-iceberg-") as tmp:
            out = Path(tmp) / "rows.arrow"
            request: dict[str, Any] = {
                "location": metadata_location,
                "out": str(out),
                "extensions": list(EXTENSIONS),
            }
            if s3 is not None:
                request["s3"] = _secret(s3)
            try:
                proc = subprocess.run(
                    [str(self.python), "-c", _SCAN_SCRIPT, json.dumps(request)],
                    capture_output=True,
                    text=True,
                    timeout=self.timeout,
                    check=False,
                    cwd=tmp,
                    stdin=subprocess.DEVNULL,
                )
            except subprocess.TimeoutExpired as exc:
                stderr = exc.stderr.decode(errors="replace") if exc.stderr else ""
                raise RuntimeError(
                    f"DuckDB iceberg_scan({metadata_location!r}) timed out after "
                    f"{self.timeout:.0f}s; stderr:\n{stderr}"
                ) from None
            if proc.returncode != 0:
                raise RuntimeError(
                    f"DuckDB iceberg_scan({metadata_location!r}) failed with status "
                    f"{proc.returncode}; stderr:\n{proc.stderr.strip()}"
                )
            # OSFile reads copy into memory: the table outlives the temp dir.
            with pa.OSFile(str(out), "rb") as source:
                return pa.ipc.open_file(source).read_all()


def s3_of(peer: Any) -> dict[str, Any]:
    """The `scan(s3=...)` settings for an ``S3Peer`` (moto)."""
    return {
        "endpoint": peer.endpoint,
        "access_key_id": peer.access_key_id,
        "secret_access_key": peer.secret_access_key,
        "region": peer.region,
    }


def _secret(s3: dict[str, Any]) -> dict[str, Any]:
    endpoint = str(s3["endpoint"])
    use_ssl = bool(s3.get("use_ssl", endpoint.startswith("https://")))
    host = endpoint.split("://", 1)[-1].rstrip("/")
    return {
        "endpoint": host,
        "key_id": s3.get("access_key_id", s3.get("key_id")),
        "secret": s3.get("secret_access_key", s3.get("secret")),
        "region": s3.get("region", "us-east-1"),
        "use_ssl": use_ssl,
    }
