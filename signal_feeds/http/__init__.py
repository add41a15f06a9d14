"""Fetching: bounded conditional GET over httpx."""
