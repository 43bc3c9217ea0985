"""Any other `QueryableSink` as a query source; defined in `hypaware.core.query_source`."""

from __future__ import annotations

from hypaware.core.query_source import GenericSource, scan_takes_exclude

__all__ = ["GenericSource", "scan_takes_exclude"]
