"""What every query source shares; defined in `hypaware.core.query_source`, the contract.

Kept under this name for the sources in this package and the code that
imported them from here.
"""

from __future__ import annotations

from hypaware.core.query_source import FloorReader, SinkView, conform
from hypaware.core.query_source import acked as _acked
from hypaware.core.query_source import filtered as _filtered
from hypaware.core.query_source import restricted as _restricted

__all__ = ["FloorReader", "SinkView", "_acked", "_filtered", "_restricted", "conform"]
