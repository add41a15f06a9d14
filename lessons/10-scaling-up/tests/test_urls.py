from __future__ import annotations

import re

import pytest
from signal_lesson.urls import UrlRejected, canonical_source_url, normalize_link, redact


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("https://example.org/rss.xml", "https://example.org/rss.xml"),
        ("HTTPS://Example.ORG:443/rss.xml#top", "https://example.org/rss.xml"),
        ("http://example.org:80", "http://example.org/"),
        ("http://example.org:8080/feed", "http://example.org:8080/feed"),
        ("https://example.org/feed?b=2&a=1", "https://example.org/feed?b=2&a=1"),
        ("https://example.org/Feed", "https://example.org/Feed"),
        ("https://[::1]:8443/feed", "https://[::1]:8443/feed"),
    ],
)
def test_canonical_source_url(url: str, canonical: str) -> None:
    assert canonical_source_url(url) == canonical


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("", "empty URL"),
        ("file:///etc/passwd", "scheme 'file' is not http or https"),
        ("ftp://example.org/feed", "scheme 'ftp' is not http or https"),
        ("example.org/feed", "scheme '(none)' is not http or https"),
        ("https://user:pw@example.org/", "credentials in the URL"),
        ("https://user@example.org/", "credentials in the URL"),
        ("https://@example.org/", "credentials in the URL"),
        ("https:///feed", "no host"),
        ("https://example.org/a b", "whitespace or control characters in the URL"),
        ("https://example.org:99999/", "malformed URL"),
    ],
)
def test_refused_source_urls(url: str, reason: str) -> None:
    with pytest.raises(UrlRejected, match=re.escape(reason)):
        canonical_source_url(url)


def test_redact_hides_credentials_only() -> None:
    assert redact("https://u:p@example.org/x") == "https://***@example.org/x"
    assert redact("https://example.org/x?a=b@c") == "https://example.org/x?a=b@c"


@pytest.mark.parametrize(
    ("link", "normalized"),
    [
        ("https://example.org/a", "https://example.org/a"),
        ("HTTPS://Example.ORG:443/a?b=1&a=2#frag", "https://example.org/a?b=1&a=2"),
        ("https://example.org:8443/a", "https://example.org:8443/a"),
        ("https://example.org", "https://example.org/"),
        ("https://example.org/a?utm_source=x", "https://example.org/a?utm_source=x"),
        ("http://example.org/a", None),
        ("https://user:pw@example.org/a", None),
        ("https://user@example.org/a", None),
        ("javascript:alert(1)", None),
        ("JavaScript:alert(1)", None),
        ("data:text/html,<b>x</b>", None),
        ("file:///etc/passwd", None),
        ("urn:signal:layout-1", None),
        ("mailto:a@example.org", None),
        ("/relative/path", None),
        ("", None),
    ],
)
def test_normalize_link(link: str, normalized: str | None) -> None:
    assert normalize_link(link) == normalized


def test_http_links_only_as_a_setting() -> None:
    assert normalize_link("http://example.org:80/a#x", allow_http=True) == "http://example.org/a"
    assert normalize_link("ftp://example.org/a", allow_http=True) is None
