"""Parse and normalize: feed bytes in, plain frozen rows out (never fetches, never stores)."""
