"""The cache the export reads: the `Cache` protocol, the embedded `LocalCache` and its partitioning."""
