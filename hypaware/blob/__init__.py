"""Blob sinks: the obstore-backed `BlobStore`, the sink writing encoder output to it, its index."""
