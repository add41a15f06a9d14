"""Which proxy a request goes through.

``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` (either case) are
honoured; the ``proxy`` setting replaces the first three (``"direct"``: no proxy).
Nothing else is read from the environment, ``.netrc`` included (see README).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from signal_feeds.errors import ConfigError
from signal_feeds.urls import proxy_url_problem, request_host, without_credentials

if TYPE_CHECKING:
    import httpx

__all__ = ["DIRECT", "ProxyRoutes"]

#: The ``proxy`` setting that turns proxies off whatever the environment says.
DIRECT = "direct"


@dataclass(frozen=True)
class ProxyRoutes:
    """Which proxy (if any) a URL goes through."""

    #: Proxy URL by scheme (``http``, ``https``, ``all``).
    proxies: tuple[tuple[str, str], ...] = ()
    #: ``NO_PROXY`` entries: host names (suffix match), addresses, networks, ``*``.
    bypass: tuple[str, ...] = ()

    @classmethod
    def from_setting(cls, setting: str = "") -> ProxyRoutes:
        """Routes from the environment, with the ``proxy`` setting (if any) replacing
        its proxy variables; ``"direct"`` turns proxies off."""
        if setting == DIRECT:
            return cls()
        import urllib.request  # read when the first connection is made, not at import

        found = urllib.request.getproxies_environment()
        bypass = tuple(h.strip().lower() for h in found.get("no", "").split(",") if h.strip())
        if setting:
            return cls((("all", setting),), bypass)
        proxies = tuple((scheme, found[scheme]) for scheme in ("http", "https", "all")
                        if found.get(scheme))
        for scheme, proxy in proxies:
            if problem := proxy_url_problem(proxy):
                # The machine's setup, not a source's failure: every request would fail
                # alike (one port past 65535 was an internal error for each source).
                raise ConfigError(f"{_variable(scheme)}={without_credentials(proxy)}: not a "
                                  f"usable proxy URL: {problem} (fix or unset it, or set "
                                  "the proxy setting)")
        return cls(proxies, bypass)

    def for_url(self, url: httpx.URL) -> str | None:
        """The proxy URL for ``url``, or ``None`` to connect directly."""
        if not self.proxies or self._bypassed(url.host.lower(), url.port):
            return None
        table = dict(self.proxies)
        proxy = table.get(url.scheme) or table.get("all")
        if proxy and "://" not in proxy:
            proxy = f"http://{proxy}"
        return proxy

    def _bypassed(self, host: str, port: int | None) -> bool:
        host = request_host(host)  # httpx shows bücher.example; either may be written here
        for entry in self.bypass:
            if entry == "*":
                return True
            if entry.startswith("[") and "]:" in entry:  # "[::1]:8080", as a URL has it
                name, _, entry_port = entry.rpartition(":")
            else:
                name, _, entry_port = entry.rpartition(":") if entry.count(":") == 1 else (
                    entry, "", "")
            if entry_port and port is not None and entry_port != str(port):
                continue
            name = name.strip("[]").lstrip("*")
            if "/" in name:
                with contextlib.suppress(ValueError):
                    if ipaddress.ip_address(host) in ipaddress.ip_network(name, strict=False):
                        return True
                continue
            suffix = request_host(name.lstrip("."))
            if host == suffix or host.endswith("." + suffix):
                return True
        return False


def _variable(scheme: str) -> str:
    """The environment variable that gave the ``scheme`` proxy: the lower-case name
    wins when both are set, as ``urllib`` reads them."""
    lower = f"{scheme}_proxy"
    return lower if os.environ.get(lower) else lower.upper()
