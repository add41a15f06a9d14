"""The TLS context of a run (certifi's CA bundle, built once and only when needed), and
what a refused certificate means in words a user can act on."""

from __future__ import annotations

import os
import re
import ssl

from signal_feeds.errors import ConfigError, causes
from signal_feeds.http.addresses import literal_address

__all__ = ["PLAIN_PORT", "TlsContext", "certificate_problem", "default_tls_context",
           "handshake_problem"]


def default_tls_context() -> ssl.SSLContext:
    """certifi's CA bundle, or the CAs OpenSSL's ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``
    name when either is set (both, when both are).

    :class:`ConfigError` naming the variable when the CAs it names cannot be loaded: a
    problem of the machine's setup, not of the source that happened to need them first.
    """
    cafile = os.environ.get("SSL_CERT_FILE") or None
    capath = os.environ.get("SSL_CERT_DIR") or None
    if cafile is None and capath is None:
        import certifi  # only when an https source exists

        return ssl.create_default_context(cafile=certifi.where())
    if capath is not None and not os.path.isdir(capath):  # OpenSSL would say nothing
        raise ConfigError(f"SSL_CERT_DIR={capath}: not a folder ({_ENVIRONMENT_HINT})")
    try:
        return ssl.create_default_context(cafile=cafile, capath=capath)
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc
        named = f"SSL_CERT_FILE={cafile}" if cafile else f"SSL_CERT_DIR={capath}"
        raise ConfigError(f"{named}: cannot load CA certificates from it: {reason} "
                          f"({_ENVIRONMENT_HINT})") from exc


_ENVIRONMENT_HINT = ("it must name PEM certificates, and it replaces certifi's bundle: "
                     "unset it to use that bundle")


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
                     "SSL_CERT_FILE naming certifi's bundle with the CA added")
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
    for current in causes(exc):
        if isinstance(current, ssl.SSLCertVerificationError):
            reason = (current.verify_message or current.reason or "verification failed"
                      ).rstrip(".")
            hint = _CERTIFICATE_HINTS.get(current.verify_code or 0)
            return f"TLS certificate refused: {reason}" + (f" ({hint})" if hint else "")
    return ""


# OpenSSL's reasons (``ssl.SSLError.reason``) for a handshake that fails before any
# certificate is looked at, with what they usually mean for a feed's host.
#: What a TLS handshake that gets no TLS answer usually means.
PLAIN_PORT = "is this a plain-http port? the http:// address may be the one"
_NOT_TLS = f"the server did not answer in TLS: {PLAIN_PORT}"
_OLD_PROTOCOL = ("the server offers only TLS versions this machine refuses, such as TLS "
                 "1.0 or 1.1: the site must upgrade")
_HANDSHAKE_HINTS = {
    "WRONG_VERSION_NUMBER": _NOT_TLS, "PACKET_LENGTH_TOO_LONG": _NOT_TLS,
    "RECORD_LAYER_FAILURE": _NOT_TLS,
    "TLSV1_ALERT_PROTOCOL_VERSION": _OLD_PROTOCOL, "UNSUPPORTED_PROTOCOL": _OLD_PROTOCOL,
    "NO_PROTOCOLS_AVAILABLE": _OLD_PROTOCOL,
    "SSLV3_ALERT_HANDSHAKE_FAILURE": "the server and this machine have no cipher or "
                                     "protocol in common, or it wants a client certificate",
    "UNSAFE_LEGACY_RENEGOTIATION_DISABLED": "the server lacks secure renegotiation "
                                            "(RFC 5746), which OpenSSL 3 requires: the "
                                            "site must upgrade",
    "DH_KEY_TOO_SMALL": "the server's Diffie-Hellman key is too small to be safe",
    "TLSV1_UNRECOGNIZED_NAME": "the server has no site under this host name",
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "the server wants a client certificate, and "
                                         "Signal sends none",
}
# "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)": the words alone.
_OPENSSL_NOISE = re.compile(r"^\[[A-Z0-9_]+: [A-Z0-9_]+\]\s*|\s*\(_ssl\.c:\d+\)$")


#: An address in the url gives TLS no host name to send (SNI, RFC 6066 §3 allows none
#: for an address), and a front end serving many sites answers "unrecognized name".
_NO_NAME_SENT = ("the url names an address, so no host name went out in the handshake "
                 "(SNI) and the server cannot tell which site is meant: use the site's "
                 "host name in the url")


def handshake_problem(exc: BaseException, host: str = "") -> str:
    """``"TLS handshake failed: <OpenSSL's reason> (<what it means>)"`` when ``exc`` or
    an exception it was raised from is a TLS error other than a refused certificate
    (see :func:`certificate_problem`), else ``""``. ``host`` is the one asked."""
    for current in causes(exc):
        if isinstance(current, ssl.SSLError) and not isinstance(
                current, ssl.SSLCertVerificationError):
            words = _OPENSSL_NOISE.sub("", str(current)).strip() or (
                current.reason or "").replace("_", " ").lower() or "the handshake failed"
            hint = _HANDSHAKE_HINTS.get(current.reason or "")
            if current.reason == "TLSV1_UNRECOGNIZED_NAME" and literal_address(host) is not None:
                hint = _NO_NAME_SENT
            return f"TLS handshake failed: {words}" + (f" ({hint})" if hint else "")
    return ""
