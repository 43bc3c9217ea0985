"""Queries across the cache and queryable sinks: filter expressions, sources and the planner."""
