"""Real storage peers on loopback for tests: moto's S3 server, azurite, our GCS server.

Each helper is a context manager that starts the peer on 127.0.0.1 with a
free port, waits (bounded) until it answers, yields what a test needs to
connect (endpoint, bucket or container, credentials), and stops it on exit.
They are plain functions so the pytest fixtures in ``tests/conftest.py`` and
third-party test suites can share them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import formatdate
from pathlib import Path

import attrs

from hypaware.testing.servers.gcs import GCSServer, run_gcs_server

__all__ = [
    "AZURITE_ACCOUNT",
    "AZURITE_KEY",
    "AzuritePeer",
    "GCSServer",
    "S3Peer",
    "azurite_binary",
    "create_azure_container",
    "free_port",
    "install_azurite",
    "run_azurite",
    "run_gcs_server",
    "run_moto",
    "run_moto_with_auth",
]

AZURITE_ACCOUNT = "devstoreaccount1"
# Azurite's published development key; it guards nothing but the emulator.
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
# The checkout's .peers/ (hypaware/testing/servers/peers.py is four levels down).
PEERS_DIR = Path(__file__).resolve().parents[3] / ".peers"
START_TIMEOUT = 30.0


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for_port(
    host: str, port: int, *, timeout: float, proc: subprocess.Popen[bytes] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"peer exited with status {proc.returncode} before listening")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout:.0f}s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


# ----------------------------------------------------------------------- S3


@attrs.frozen
class S3Peer:
    """How to reach a moto S3 server: use ``allow_http`` (it is plain HTTP on loopback)."""

    endpoint: str
    bucket: str
    region: str = "us-east-1"
    access_key_id: str = "testing"
    secret_access_key: str = attrs.field(default="testing", repr=False)

    def create_bucket(self, name: str) -> None:
        """Create a bucket (obstore cannot)."""
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            region_name=self.region,
        )
        client.create_bucket(Bucket=name)

    def destination_config(self, prefix: str = "", **extra: object) -> dict[str, object]:
        """The ``config`` of an ``@hypaware/s3`` sink on this server (`extra` adds or overrides)."""
        return {
            "bucket": self.bucket,
            "endpoint": self.endpoint,
            "allow_http": True,
            "region": self.region,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            "prefix": prefix,
            **extra,
        }

    def store_kwargs(self) -> dict[str, object]:
        """Keyword arguments for ``obstore.store.S3Store(bucket, **kwargs)``."""
        return {
            "endpoint": self.endpoint,
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
            "region": self.region,
            "client_options": {"allow_http": True},
        }


@contextmanager
def run_moto(bucket: str = "hypaware-test") -> Iterator[S3Peer]:
    """moto's threaded S3 server in this process, with `bucket` created."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        _wait_for_port("127.0.0.1", port, timeout=START_TIMEOUT)
        peer = S3Peer(endpoint=f"http://127.0.0.1:{port}", bucket=bucket)
        peer.create_bucket(bucket)
        yield peer
    finally:
        server.stop()


@contextmanager
def run_moto_with_auth(
    bucket: str = "hypaware-auth", *, unauthenticated: int = 1
) -> Iterator[S3Peer]:
    """moto's S3 server in a child process that checks access keys.

    Only the bucket creation runs unauthenticated (and `unauthenticated` - 1
    more requests, e.g. to make an IAM user and its key); every later request must
    carry a key moto's IAM knows, so any key a test makes up is refused with
    403 (InvalidAccessKeyId). Runs in its own process because moto's auth
    switch is process-wide.
    """
    port = free_port()
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT=str(unauthenticated))
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_for_port("127.0.0.1", port, timeout=START_TIMEOUT, proc=proc)
        peer = S3Peer(endpoint=f"http://127.0.0.1:{port}", bucket=bucket)
        peer.create_bucket(bucket)
        yield peer
    finally:
        _stop(proc)


# -------------------------------------------------------------------- Azure


@attrs.frozen
class AzuritePeer:
    """How to reach azurite's blob service (path-style endpoint including the account)."""

    endpoint: str
    container: str
    account: str = AZURITE_ACCOUNT
    account_key: str = attrs.field(default=AZURITE_KEY, repr=False)

    def create_container(self, name: str) -> None:
        create_azure_container(self.endpoint, name, self.account, self.account_key)

    def store_kwargs(self) -> dict[str, object]:
        """Keyword arguments for ``obstore.store.AzureStore(container, **kwargs)``."""
        return {
            "account_name": self.account,
            "account_key": self.account_key,
            "endpoint": self.endpoint,
            "client_options": {"allow_http": True},
        }


def create_azure_container(endpoint: str, name: str, account: str, key: str) -> None:
    """Create a container with one SharedKey-signed request (obstore cannot create them)."""
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    path = f"{parts.path.rstrip('/')}/{name}"
    date = formatdate(usegmt=True)
    version = "2021-08-06"
    # Content-Length is signed as empty when it is zero (versions after 2015-02-21).
    to_sign = "\n".join(
        [
            "PUT",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            f"x-ms-date:{date}\nx-ms-version:{version}",
            f"/{account}{path}\nrestype:container",
        ]
    )
    signature = base64.b64encode(
        hmac.new(base64.b64decode(key), to_sign.encode("utf-8"), hashlib.sha256).digest()
    ).decode()
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        conn.request(
            "PUT",
            f"{path}?restype=container",
            body=b"",
            headers={
                "x-ms-date": date,
                "x-ms-version": version,
                "Authorization": f"SharedKey {account}:{signature}",
                "Content-Length": "0",
            },
        )
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    if response.status not in (201, 409):
        raise RuntimeError(f"creating container {name!r} failed: {response.status} {body!r}")


def azurite_binary() -> str | None:
    """The ``azurite-blob`` executable: ``$HYPAWARE_AZURITE``, ``.peers/azurite``, or PATH."""
    explicit = os.environ.get("HYPAWARE_AZURITE")
    if explicit:
        return explicit
    local = PEERS_DIR / "azurite" / "node_modules" / ".bin" / "azurite-blob"
    if local.exists():
        return str(local)
    return shutil.which("azurite-blob")


def install_azurite(timeout: float = 300.0) -> str | None:
    """Install azurite into ``.peers/azurite`` with npm; None if node or npm is missing."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return None
    target = PEERS_DIR / "azurite"
    target.mkdir(parents=True, exist_ok=True)
    command = [npm, "install", "--silent", "--no-audit", "--no-fund"]
    command += ["--prefix", str(target), "azurite@3"]
    subprocess.run(
        command,
        check=True,
        timeout=timeout,
        stdout=subprocess.DEVNULL,
    )
    return azurite_binary()


@contextmanager
def run_azurite(binary: str, container: str = "hypaware-test") -> Iterator[AzuritePeer]:
    """azurite's blob service (in-memory) on a free port, with `container` created."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="azurite-") as workdir:
        proc = subprocess.Popen(
            [
                binary,
                "--blobHost",
                "127.0.0.1",
                "--blobPort",
                str(port),
                "--inMemoryPersistence",
                "--silent",
                "--skipApiVersionCheck",
                "--loose",
                "--disableTelemetry",
            ],
            cwd=workdir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            _wait_for_port("127.0.0.1", port, timeout=START_TIMEOUT, proc=proc)
            peer = AzuritePeer(
                endpoint=f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}", container=container
            )
            peer.create_container(container)
            yield peer
        finally:
            _stop(proc)
