"""The TLS context of a run (certifi's CA bundle, built once and only when needed), and
what a refused certificate means in words a user can act on."""

from __future__ import annotations

import os
import ssl

__all__ = ["TlsContext", "certificate_problem", "default_tls_context"]


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


# OpenSSL's verify codes (X509_V_ERR_*) that a feed's host commonly causes, with what to
# do about them. The OpenSSL text stays in the message: it is what a search finds.
_UNTRUSTED_ISSUER = ("the server may leave out its intermediate certificate, which "
                     "browsers fetch for themselves; a private CA can be trusted through "
                     "SSL_CERT_FILE")
_CERTIFICATE_HINTS = {
    2: _UNTRUSTED_ISSUER, 20: _UNTRUSTED_ISSUER, 21: _UNTRUSTED_ISSUER,
    9: "check this machine's clock",
    10: "the site must renew it",
    18: "it is self-signed: SSL_CERT_FILE can name it to trust it",
    19: "a self-signed CA signed it: SSL_CERT_FILE can name it to trust it",
    62: "it names other hosts: is the address right?",
    64: "it names other addresses: is the address right?",
}


def certificate_problem(exc: BaseException) -> str:
    """``"TLS certificate refused: <OpenSSL's reason> (<what to do>)"`` when ``exc`` or
    an exception it was raised from is a certificate verification failure, else ``""``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            reason = (current.verify_message or current.reason or "verification failed"
                      ).rstrip(".")
            hint = _CERTIFICATE_HINTS.get(current.verify_code or 0)
            return f"TLS certificate refused: {reason}" + (f" ({hint})" if hint else "")
        current = current.__cause__ or current.__context__
    return ""
