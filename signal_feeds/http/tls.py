"""The TLS context of a run: certifi's CA bundle, built once and only when needed."""

from __future__ import annotations

import os
import ssl

__all__ = ["TlsContext", "default_tls_context"]


def default_tls_context() -> ssl.SSLContext:
    """certifi's CA bundle, or OpenSSL's ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set."""
    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    import certifi  # only when an https source exists

    return ssl.create_default_context(cafile=certifi.where())


class TlsContext:
    """One ``ssl.SSLContext`` for a run, built on first use: loading a CA bundle takes
    tens of milliseconds, and a run of plain-http sources never needs one."""

    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        self._context = context

    def get(self) -> ssl.SSLContext:
        """The context (built now if this is the first https connection)."""
        if self._context is None:
            self._context = default_tls_context()
        return self._context
