"""A real PostgreSQL server on loopback, from the Debian packages, for pyiceberg's SQL catalog.

`run_postgres` makes a throwaway cluster in a temp dir (``initdb``), starts it
listening on 127.0.0.1 only, on a free port, with its unix socket inside the
temp dir (``pg_ctl -w``, bounded), yields a `PostgresPeer`, and stops it
(``pg_ctl stop -m fast``) and removes the temp dir on exit. The packaged
cluster (``/var/lib/postgresql``) is never touched.

PostgreSQL refuses to run as root: as root the server runs as the ``postgres``
system user (created with ``useradd --system`` when missing), which owns the
temp dir; as any other user it runs as that user. Loopback auth is ``trust``.

The pytest fixtures (``postgres``, ``postgres_catalog_uri``) are in ``tests/conftest.py``.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import stat
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

from hypaware.testing.servers.peers import free_port

__all__ = ["PostgresPeer", "postgres_bindir", "run_postgres"]

START_TIMEOUT = 60  # seconds, for pg_ctl -w -t
COMMAND_TIMEOUT = 120.0  # seconds, for any one initdb / pg_ctl / useradd
SERVER_USER = "postgres"  # the system user the server runs as when we are root
SUPERUSER = "postgres"  # the database role initdb makes; tests connect as it
DEBIAN_ROOT = Path("/usr/lib/postgresql")


def postgres_bindir() -> Path | None:
    """The newest PostgreSQL bin dir with ``initdb`` and ``pg_ctl``, or None.

    ``$HYPAWARE_PG_BIN`` first, then Debian's ``/usr/lib/postgresql/<ver>/bin``
    (highest version), then ``initdb`` on PATH.
    """
    explicit = os.environ.get("HYPAWARE_PG_BIN")
    candidates: list[Path] = [Path(explicit)] if explicit else []
    if DEBIAN_ROOT.is_dir():
        versions = [p for p in DEBIAN_ROOT.iterdir() if re.fullmatch(r"\d+(\.\d+)*", p.name)]
        versions.sort(key=lambda p: tuple(int(x) for x in p.name.split(".")), reverse=True)
        candidates += [p / "bin" for p in versions]
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for bindir in candidates:
        if os.access(bindir / "initdb", os.X_OK) and os.access(bindir / "pg_ctl", os.X_OK):
            return bindir
    return None


@attrs.frozen
class PostgresPeer:
    """How to reach the server: TCP on 127.0.0.1, user ``postgres``, no password (trust)."""

    host: str
    port: int
    user: str = SUPERUSER

    def uri(self, database: str = "postgres", *, driver: str = "psycopg") -> str:
        """A SQLAlchemy URI, e.g. for pyiceberg's ``SqlCatalog(uri=...)``."""
        return f"postgresql+{driver}://{self.user}@{self.host}:{self.port}/{database}"

    def _admin(self, sql: str) -> None:
        import psycopg

        dsn = f"host={self.host} port={self.port} user={self.user} dbname=postgres"
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database (a fresh name unless given); returns its name."""
        name = name or f"t_{uuid.uuid4().hex[:12]}"
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            raise ValueError(f"not a plain database name: {name!r}")
        self._admin(f"CREATE DATABASE {name}")
        return name

    def drop_database(self, name: str) -> None:
        """Drop a database, closing whatever connections a test left open."""
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            raise ValueError(f"not a plain database name: {name!r}")
        self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _ensure_server_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        pass
    subprocess.run(
        ["useradd", "--system", "--user-group", "--no-create-home", SERVER_USER],
        check=True,
        timeout=COMMAND_TIMEOUT,
        capture_output=True,
    )
    return pwd.getpwnam(SERVER_USER)


def _temp_parent() -> str | None:
    """Where to make the temp dir: the usual one, unless another user cannot reach it."""
    if os.geteuid() != 0:
        return None
    base = tempfile.gettempdir()
    if os.stat(base).st_mode & stat.S_IXOTH:
        return None
    return "/tmp"


def _log_tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no server log)"


@contextmanager
def run_postgres(bindir: Path) -> Iterator[PostgresPeer]:
    """A fresh PostgreSQL cluster on 127.0.0.1 and a free port, stopped and removed on exit."""
    as_root = os.geteuid() == 0
    run_as: dict[str, object] = {}
    if as_root:
        user = _ensure_server_user()
        # subprocess switches to the server user itself (setgid/setgroups/setuid
        # in the child): no runuser/su/sudo needed, and nothing at all when not root.
        run_as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    workdir = Path(tempfile.mkdtemp(prefix="hypaware-pg-", dir=_temp_parent()))
    if as_root:
        os.chown(workdir, user.pw_uid, user.pw_gid)
    datadir = workdir / "data"
    log = workdir / "server.log"
    env = dict(os.environ, LC_ALL="C", LANG="C")
    if as_root:
        env.update(HOME=str(workdir), USER=SERVER_USER, LOGNAME=SERVER_USER)

    def run(*args: str, ok: tuple[int, ...] = (0,)) -> int:
        proc = subprocess.run(
            [str(bindir / args[0]), *args[1:]],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
            **run_as,  # type: ignore[call-overload]
        )
        if proc.returncode not in ok:
            raise RuntimeError(
                f"{' '.join(args[:1] + args[-1:])} failed with status {proc.returncode}:\n"
                f"{proc.stderr.strip()}\nserver log ({log}):\n{_log_tail(log)}"
            )
        return proc.returncode

    port = free_port()
    ctl = ["pg_ctl", "-D", str(datadir), "-w", "-t", str(START_TIMEOUT)]
    options = [
        "-h 127.0.0.1",
        f"-p {port}",
        f"-k {workdir}",
        # A throwaway cluster: durability is not worth the fsyncs.
        "-c fsync=off",
        "-c synchronous_commit=off",
        "-c full_page_writes=off",
    ]
    try:
        initdb = ["initdb", "-D", str(datadir), "-A", "trust", "-U", SUPERUSER, "-E", "UTF8"]
        run(*initdb, "--no-sync")
        run(*ctl, "-l", str(log), "-o", " ".join(options), "start")
        yield PostgresPeer(host="127.0.0.1", port=port)
    finally:
        try:
            # pg_ctl status: 0 running, 3 not running (never started), 4 no data dir.
            if datadir.is_dir() and run("pg_ctl", "-D", str(datadir), "status", ok=(0, 3, 4)) == 0:
                run(*ctl, "-m", "fast", "stop")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
