"""``signal demo`` and the small teaching server it runs on 127.0.0.1."""
