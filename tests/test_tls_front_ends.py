"""TLS front ends that serve many sites on one address, against a real TLS server on
127.0.0.1: what the report says when one cannot tell which site is asked for."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_config
from test_connections import FEED, RawServer, ok

from signal_feeds import run_fetch


def _refuse_without_a_name(conn: ssl.SSLObject, name: str | None,
                           context: ssl.SSLContext) -> int | None:
    # What a CDN edge or nginx's `ssl_reject_handshake on` default server does.
    return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME if name is None else None


@pytest.fixture
def sni_only() -> Iterator[tuple[RawServer, ssl.SSLContext]]:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(context)
    context.sni_callback = _refuse_without_a_name
    server = RawServer(lambda head: (ok(FEED), False), tls=context)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    yield server, client
    server.close()


def test_a_source_given_by_address_to_a_server_that_needs_a_name_says_so(
        sni_only: tuple[RawServer, ssl.SSLContext], db_path: Path) -> None:
    # The hint was "the server has no site under this host name", about a url that
    # names no host: TLS sends no name for an address, so such a front end refuses it.
    server, client = sni_only
    sources = {"by-address": server.url("/feed.xml"),
               "by-name": server.url("/feed.xml", host="localhost")}
    report = run_fetch(make_config(db_path, sources), force=True, ssl_context=client)
    assert report.get("by-name").status == "fetched"
    failed = report.get("by-address")
    assert (failed.status, failed.error) == (
        "failed", "TLS handshake failed: tlsv1 unrecognized name (the url names an "
                  "address, so no host name went out in the handshake (SNI) and the server "
                  "cannot tell which site is meant: use the site's host name in the url)")
