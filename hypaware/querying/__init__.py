"""Queries across the cache and queryable sinks: filter expressions, sources and the planner."""

from hypaware._moved import forward

# The 0.1 module of this name: its names still import from here, with a warning.
__getattr__ = forward(__name__)
