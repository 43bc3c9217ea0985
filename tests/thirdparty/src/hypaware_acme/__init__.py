"""A third-party hypaware plugin: ``@acme/rowlog`` appends exported rows to a JSON-lines file."""
