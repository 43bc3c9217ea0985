"""The cache the export reads: the `Cache` protocol, the embedded `LocalCache`, partitioning."""
