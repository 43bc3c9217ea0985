"""Iceberg tables as a query source; defined in `hypaware.iceberg.query_source`."""

from __future__ import annotations

from hypaware.iceberg.query_source import IcebergSource

__all__ = ["IcebergSource"]
