"""A listening socket on 127.0.0.1 whose connections are each served on a thread.

The raw servers of the HTTP tests (byte-exact answers, dropped connections, a
forwarding proxy) differ only in what they do with a connection; tests import this as
``from threaded_socket import serve_connections``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

__all__ = ["serve_connections"]


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
