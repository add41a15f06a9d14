"""A listening socket on 127.0.0.1 whose connections are each served on a thread.

The raw servers of the HTTP tests (byte-exact answers, dropped connections, a
forwarding proxy) differ only in what they do with a connection; tests import this as
``from threaded_socket import serve_connections``.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator

__all__ = ["interrupt_when_waiting", "serve_connections", "silent_server"]


def serve_connections(serve: Callable[[socket.socket], None], *,
                      accepted: Callable[[], None] | None = None) -> socket.socket:
    """Listen on a free port of 127.0.0.1 and run ``serve(conn)`` on a daemon thread for
    each connection (after ``accepted()``, if given), until the returned socket is
    closed."""
    sock = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:  # closed: the server is done
                return
            if accepted is not None:
                accepted()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return sock


@contextlib.contextmanager
def silent_server() -> Iterator[tuple[str, threading.Event]]:
    """A server that accepts connections and never says a word: its base URL, and an
    event set once a connection came (a run is then surely in the middle of a request).
    """
    held: list[socket.socket] = []
    accepted = threading.Event()
    sock = serve_connections(held.append, accepted=accepted.set)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", accepted
    finally:
        sock.close()
        for conn in held:
            conn.close()


def interrupt_when_waiting(argv: list[str], accepted: threading.Event,
                           signum: int = signal.SIGINT) -> tuple[int, str, str]:
    """Start ``argv``, send it Ctrl-C (SIGINT, or ``signum``) once ``accepted`` is set,
    and return its exit status, stdout and stderr."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert accepted.wait(60), "the run never connected"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err
