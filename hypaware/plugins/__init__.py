"""First-party plugins, one module each, registered through entry points."""
