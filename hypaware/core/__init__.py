"""What every other room builds on.

Contracts, data types, errors, manifests, the registry, the pure resolver,
config, secrets, paths and schedules. Nothing here imports another room.
"""
