"""Entry identity and match keys: pure functions over parsed rows."""
