"""Side-by-side benchmarks: hypaware against the plain library calls it wraps.

Each module runs on its own (``python -m benchmarks.<name> --rows N``) and
prints both timings and their ratio; ``python -m benchmarks`` runs them all.
"""
