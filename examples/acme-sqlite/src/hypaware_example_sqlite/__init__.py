"""An example third-party hypaware plugin package.

- ``@acme/sqlite`` (a request-style sink): appends exported rows to a SQLite
  database, one table per dataset, exactly once per partition.
- ``@acme/arrow-ipc`` (an encoder): writes blob-sink files in the Arrow IPC
  file format, for any hypaware destination.

The manifests live in `hypaware_example_sqlite.manifests`, which imports
nothing heavy; the implementations are imported only when a sink is built.
"""

__version__ = "1.0.0"
