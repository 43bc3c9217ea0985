"""The export driver: turning plans into live sinks, scheduled passes, durable progress and observers."""
