"""Removed in 0.2.0: queries take filter trees (see CHANGELOG.md)."""

from hypaware._moved import forward

__getattr__ = forward(__name__)
