"""Parquet blob sinks as a query source; defined in `hypaware.blob.query_source`."""

from __future__ import annotations

from hypaware.blob.query_source import ParquetSource

__all__ = ["ParquetSource"]
