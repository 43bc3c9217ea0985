"""Encoders: Arrow record batches into file bytes (Parquet, JSONL).

`config` holds the config classes and stays light (plugin manifests name
them); the encoder modules import pyarrow and do the work.
"""
