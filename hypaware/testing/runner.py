"""Deprecated 0.1 path: its names moved in 0.2.0 (see CHANGELOG.md); each access warns."""

from hypaware._moved import forward, names

__all__ = names(__name__)
__getattr__ = forward(__name__)
