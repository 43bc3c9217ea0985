"""Encoders: Arrow record batches into file bytes (Parquet, JSONL).

The plugin modules (`hypaware.plugins.format_parquet`, `format_jsonl`) hold
the config classes and manifests and stay light; the modules here import
pyarrow and do the work.
"""
