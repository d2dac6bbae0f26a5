"""A tiny HTTP health endpoint: ``GET /health`` returns the worker's state as JSON.

Status 200 while the worker is healthy (any state but ``failed``), 503 otherwise.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

UNHEALTHY_STATES = frozenset({"failed"})


class HealthServer:
    """Serve ``GET /health`` on ``host:port`` from a daemon thread (port 0 picks a free port)."""

    def __init__(self, status: Callable[[], Mapping[str, Any]], port: int, host: str = "0.0.0.0") -> None:
        status_fn = status

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != "/health":
                    self._send(404, {"error": f"no route {self.path!r}; try /health"})
                    return
                body = dict(status_fn())
                self._send(503 if body.get("state") in UNHEALTHY_STATES else 200, body)

            def _send(self, code: int, body: Mapping[str, Any]) -> None:
                data = json.dumps(body, default=str).encode("utf-8")
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # quiet: the worker logs as JSON
                return

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="geo-health", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
