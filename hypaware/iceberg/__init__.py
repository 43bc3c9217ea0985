"""The Iceberg table format behind ``@hypaware/format-iceberg``.

Importing any module here imports pyiceberg and pyarrow: only the plugin's
factory does, once a sink is built.

- `fileio`: a pyiceberg FileIO over the sink's obstore-backed blob store.
- `catalog`: opening the configured catalog and registering tables.
- `schema`: Arrow dataset schemas as Iceberg schemas, and evolution checks.
- `layout`: rows grouped by day and sorted by lookup key, and file names.
- `table_format`: `IcebergTableFormat`, the write and scan paths.
"""
