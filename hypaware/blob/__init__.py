"""Blob sinks: the obstore-backed `BlobStore`, the sink that writes encoder output to it, and its batch index."""
