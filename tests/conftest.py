"""Shared fixtures: real storage peers on loopback, and the hypothesis profiles.

The peers are session-scoped (started once, stopped at the end):

- ``moto_s3``: an `S3Peer` (endpoint, bucket, region, access keys) for moto's S3 server.
- ``moto_s3_auth``: like ``moto_s3`` but in a moto that checks access keys
  (every key a test makes up is refused); for wrong-credential tests.
- ``azurite``: an `AzuritePeer` (endpoint, container, account, key). Skipped
  when node/npm are missing locally; under ``CI`` a missing azurite fails.
- ``gcs_server``: our loopback GCS XML-API server (endpoint, bucket, token).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from hypaware.testing.peers import (
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
