"""The export driver: plans built into sinks, scheduled passes, durable progress, observers."""
