"""The SQLite backend of the store: connection, schema, writes, reads, maintenance."""
