"""A webhook receiver for the tests: a real HTTP server on 127.0.0.1 (``hookd`` fixture) that
answers every POST with a chosen status and body and keeps what it was sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest


@dataclass
class Hookd:
    """A webhook receiver: answers ``status`` with ``body`` and keeps what it was sent."""

    url: str
    status: int = 200
    body: bytes = b"ok"
    received: list[dict[str, Any]] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    """A status of its own for a URL path (``/pass``, ``/gate``), ``status`` for the others."""


@pytest.fixture
def hookd() -> Iterator[Hookd]:
    state = Hookd("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            data = self.rfile.read(int(self.headers["Content-Length"]))
            query = parse_qs(urlsplit(self.path).query)
            path = urlsplit(self.path).path
            state.received.append(
                {"event": json.loads(data), "query": query, "headers": dict(self.headers), "path": path}
            )
            self.send_response(state.statuses.get(path, state.status))
            self.send_header("Content-Length", str(len(state.body)))
            self.end_headers()
            self.wfile.write(state.body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
