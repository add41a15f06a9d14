"""Credentials never leave in what Signal reports: a user name and password that a
server's ``Location`` carries, or that a source built in code carries, are masked in
errors, in the database and in ``signal sources``, and are never sent. Real servers on
127.0.0.1 and real SQLite files."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import make_config, query
from threaded_socket import serve_connections

from signal_feeds import ConfigError, run_fetch

SECRET = "hunter2-s3cret"


@pytest.fixture
def answer() -> Iterator[tuple[str, dict[str, bytes]]]:
    """A raw server (werkzeug refuses to send some of these Locations): its base URL,
    and the answer each path gets, byte for byte."""
    answers: dict[str, bytes] = {}

    def serve(conn: socket.socket) -> None:
        with conn:
            request = b""
            while b"\r\n\r\n" not in request and (chunk := conn.recv(65536)):
                request += chunk
            path = request.split(b" ", 2)[1].decode("ascii") if request else ""
            conn.sendall(answers.get(path, b"HTTP/1.1 404 Not Found\r\n"
                                           b"Content-Length: 0\r\n\r\n"))

    sock = serve_connections(serve)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", answers
    finally:
        sock.close()


def redirect(status: int, location: str) -> bytes:
    return (f"HTTP/1.1 {status} Moved\r\nLocation: {location}\r\nContent-Length: 0\r\n"
            "Connection: close\r\n\r\n").encode()


@pytest.mark.parametrize(("status", "location", "error"), [
    # Followed, each would be refused: the message names the address, not its password.
    (302, f"ftp://ana:{SECRET}@files.example/feed.xml",
     "redirect to a non-http(s) URL 'ftp://***@files.example/feed.xml' refused"),
    (302, f"http://ana:{SECRET}@127.0.0.1:99999/feed.xml",
     "redirect to an invalid URL 'http://***@127.0.0.1:99999/feed.xml'"),
    # A "#" in the password ends the authority early for urlsplit: masked all the same.
    (301, f"http://ana:x#{SECRET}@127.0.0.1:8080/feed.xml",
     "redirect to an invalid URL 'http://***@127.0.0.1:8080/feed.xml'"),
    (302, f"http://ana:{SECRET}@[::1/feed.xml",
     "redirect to an invalid URL 'http://***@[::1/feed.xml'"),
    # Not followed at all: the address a 300 suggests is shown to help fix the url.
    (300, f"https://ana:{SECRET}@mirror.example/feed.xml",
     "HTTP 300 Multiple Choices: not followed (it points to "
     "'https://***@mirror.example/feed.xml')"),
])
def test_a_location_with_a_password_is_reported_without_it(
        answer: tuple[str, dict[str, bytes]], db_path: Path, status: int, location: str,
        error: str) -> None:
    base, answers = answer
    answers["/feed"] = redirect(status, location)
    url = f"{base}/feed"
    rep = run_fetch(make_config(db_path, {"s": url}), force=True).get("s")
    assert (rep.status, rep.error) == ("failed", error)
    # Nor is it kept: the error a `signal sources` shows comes from the database.
    stored = query(db_path, "SELECT last_error FROM sources WHERE id = 's'")
    assert stored == [(error,)]
    assert not any(SECRET in str(row) for row in query(db_path, "SELECT * FROM fetches"))


def test_a_source_built_in_code_with_a_password_is_refused_before_any_request(
        answer: tuple[str, dict[str, bytes]], tmp_path: Path) -> None:
    # load_config refuses such a url; a Config built in code was fetched without the
    # password (a 401 that did not say why) and kept it in the database.
    base, answers = answer
    answers["/feed"] = (b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"x\"\r\n"
                        b"Content-Length: 0\r\n\r\n")
    db_path = tmp_path / "signal.db"
    url = base.replace("http://", f"http://ana:{SECRET}@") + "/feed"
    with pytest.raises(ConfigError) as caught:
        run_fetch(make_config(db_path, {"private": url}), force=True)
    assert caught.value.source_id == "private"
    message = str(caught.value)
    assert SECRET not in message and "'http://***@127.0.0.1:" in message, message
    assert "credentials in the URL" in message, message
    assert not db_path.exists()  # nothing stored, so nothing exported later


@pytest.mark.parametrize(("url", "reason"), [
    ("ftp://127.0.0.1/feed", "scheme"),
    ("https://host..example/feed", "empty label"),
    ("not a url", "whitespace"),
])
def test_a_source_built_in_code_gets_load_configs_url_check(
        url: str, reason: str, tmp_path: Path) -> None:
    # A Config built in code skipped the url check: an ftp:// url ended the run in
    # "internal error: KeyError: b'ftp'" instead of a config error naming the source.
    db_path = tmp_path / "signal.db"
    with pytest.raises(ConfigError) as caught:  # when the Config is made
        run_fetch(make_config(db_path, {"odd": url}), force=True)
    assert caught.value.source_id == "odd"
    assert reason in str(caught.value), str(caught.value)
    assert not db_path.exists()
