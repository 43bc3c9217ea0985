"""The cache the export reads: the `Cache` protocol, the embedded `LocalCache`, partitioning."""

from hypaware._moved import forward

# The 0.1 module of this name: its names still import from here, with a warning.
__getattr__ = forward(__name__)
