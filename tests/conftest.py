"""Shared fixtures: real storage peers on loopback, and the hypothesis profiles.

The peers are session-scoped (started once, stopped at the end):

- ``moto_s3``: an `S3Peer` (endpoint, bucket, region, access keys) for moto's S3 server.
- ``moto_s3_auth``: like ``moto_s3`` but in a moto that checks access keys
  (every key a test makes up is refused); for wrong-credential tests.
- ``azurite``: an `AzuritePeer` (endpoint, container, account, key). Skipped
  when node/npm are missing locally; under ``CI`` a missing azurite fails.
- ``gcs_server``: our loopback GCS XML-API server (endpoint, bucket, token).
- ``postgres``: a `PostgresPeer` (host, port, user) for a throwaway PostgreSQL
  cluster from the Debian packages (``tests/peers_postgres.py``); and, per test,
  ``postgres_catalog_uri``: a fresh database's SQLAlchemy URI for pyiceberg's
  ``SqlCatalog(uri=...)``, dropped after the test.
- ``duckdb_iceberg``: a `DuckDBIceberg` whose ``scan(metadata_location, s3=...)``
  reads an Iceberg table with DuckDB's iceberg extension, in ``.peers/duckdb``
  (``tests/peers_duckdb.py``).

The PostgreSQL and DuckDB peers are skipped when they cannot be had locally
(no PostgreSQL binaries; no registry to build ``.peers/duckdb``); under ``CI``,
where ``.ci/run`` installs both, that fails instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NoReturn

import pytest
from hypothesis import HealthCheck, settings

from hypaware.testing.servers.peers import (
    AzuritePeer,
    GCSServer,
    S3Peer,
    azurite_binary,
    install_azurite,
    run_azurite,
    run_gcs_server,
    run_moto,
    run_moto_with_auth,
)
from tests.peers_duckdb import DuckDBIceberg, duckdb_peer_python, install_duckdb_peer
from tests.peers_postgres import PostgresPeer, postgres_bindir, run_postgres

settings.register_profile(
    "ci",
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[S3Peer]:
    with run_moto() as peer:
        yield peer


@pytest.fixture(scope="session")
def moto_s3_auth() -> Iterator[S3Peer]:
    with run_moto_with_auth() as peer:
        yield peer


@pytest.fixture(scope="session")
def azurite() -> Iterator[AzuritePeer]:
    binary = azurite_binary() or install_azurite()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("azurite is required in CI: install node and npm (see .ci/run)")
        pytest.skip("azurite needs node and npm, which are not installed")
    with run_azurite(binary) as peer:
        yield peer


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[GCSServer]:
    with run_gcs_server() as server:
        yield server


def _unavailable(reason: str) -> NoReturn:
    """Skip, or fail under CI (where .ci/run installs every peer)."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (required in CI: see .ci/run)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresPeer]:
    bindir = postgres_bindir()
    if bindir is None:
        _unavailable(
            "PostgreSQL is not installed: no initdb/pg_ctl in /usr/lib/postgresql/*/bin "
            "or on PATH (apt-get install postgresql)"
        )
    with run_postgres(bindir) as peer:
        yield peer


@pytest.fixture
def postgres_catalog_uri(postgres: PostgresPeer) -> Iterator[str]:
    """A SQLAlchemy URI (``postgresql+psycopg://...``) of a database made for this test."""
    name = postgres.create_database()
    yield postgres.uri(name)
    postgres.drop_database(name)


@pytest.fixture(scope="session")
def duckdb_iceberg() -> DuckDBIceberg:
    python = duckdb_peer_python()
    if python is None:
        python, why = install_duckdb_peer()
        if python is None:
            _unavailable(
                f"DuckDB's iceberg extension is not available: building .peers/duckdb failed: {why}"
            )
    return DuckDBIceberg(python=python)
