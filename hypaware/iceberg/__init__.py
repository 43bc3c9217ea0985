"""The Iceberg table format behind ``@hypaware/format-iceberg``.

`config` is light (the manifest names its classes); every other module here
imports pyiceberg and pyarrow, which only the plugin's factory does, once a
sink is built. Those need the ``iceberg`` extra:
``pip install 'hypaware[iceberg]'``.

- `config`: `IcebergConfig` and `CatalogConfig`, and their cross-key checks.
- `fileio`: a pyiceberg FileIO over the sink's obstore-backed blob store.
- `catalog`: opening the configured catalog and registering tables.
- `schema`: Arrow dataset schemas as Iceberg schemas, and evolution checks.
- `day_layout`: rows grouped by day and sorted by lookup key, and file names.
- `datafiles`: a batch's partitions read and written as Parquet data files.
- `commit`: one snapshot per batch, exactly once: its summary, the append.
- `scan`: a table's rows read back, and the row filter for time and keys.
- `table_format`: `IcebergTableFormat`: tables loaded and evolved, a batch written step by step.
"""
