"""Loopback servers and storage peers for tests: real HTTP on 127.0.0.1, no network.

- `hypaware.testing.servers.central`: a reference central ingest server
  (``docs/central-proto.md``), scriptable to misbehave;
- `hypaware.testing.servers.webhook`: a reference webhook receiver that
  verifies signatures as ``docs/request-sinks.md`` asks;
- `hypaware.testing.servers.gcs`: a GCS XML-API server speaking obstore's
  dialect;
- `hypaware.testing.servers.rest_catalog`: an Iceberg REST catalog backed by
  pyiceberg's ``SqlCatalog``;
- `hypaware.testing.servers.peers`: context managers that start moto's S3
  server, azurite and the GCS server on a free port.

They are for hypaware's own tests and for trying things out; none of them is
public API (``hypaware.testing.conformance`` is), and they need no pytest.
"""
