"""Blob destinations: turning a local-fs, S3, GCS, Azure or memory config into an obstore store."""
