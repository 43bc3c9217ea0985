"""Helpers for testing hypaware and plugins written against it, in two packages.

- `hypaware.testing.conformance`: the conformance suite a plugin's tests
  subclass (``SinkContract``, ``EncoderContract``, ``BlobStoreContract``,
  ...). It is public: its ``__all__`` holds still between releases. It needs
  pytest and pytest-asyncio: install the ``testing`` extra,
  ``pip install 'hypaware[testing]'``.
- `hypaware.testing.servers`: the loopback servers and storage peers
  hypaware's own tests run against (a central ingest server, a webhook
  receiver, a GCS XML-API server, an Iceberg REST catalog, moto and
  azurite). Internal: they may change in any release.

The conformance suite never imports the servers (a contract in
pyproject.toml's ``[tool.importlinter]``). The other modules here are the
0.1 paths of both, forwarding with a `DeprecationWarning` until 0.3.0
(``hypaware/_moved.py``).
"""
