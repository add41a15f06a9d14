"""The fixed source list: the TOML file, its validation, and OPML in and out."""
