"""The contracts every other room builds on: types, errors, manifests, the registry, the pure resolver, config, secrets and paths.

Nothing here imports from another room of the package.
"""
