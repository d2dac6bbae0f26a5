"""Container health probe: ``python -m geo_service.healthcheck`` (Docker HEALTHCHECK, ECS task health check).

Exits 0 when ``GET http://127.0.0.1:$HEALTH_PORT/health`` answers 200, 1 otherwise. With
``HEALTH_PORT`` unset or 0 the endpoint is disabled and the probe reports healthy (the
process being alive is all there is to check).
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

from geokernel.contracts.env import EnvVar


def probe(port: int, timeout_s: float = 2.0) -> bool:
    """True when the worker's /health on ``port`` answers 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=timeout_s) as resp:
            return int(resp.status) == 200
    except (urllib.error.URLError, OSError):
        return False


def main() -> int:
    raw = os.environ.get(EnvVar.HEALTH_PORT, "0").strip() or "0"
    try:
        port = int(raw)
    except ValueError:
        print(f"{EnvVar.HEALTH_PORT}={raw!r} is not a port number", file=sys.stderr)
        return 1
    return 0 if port == 0 or probe(port) else 1


if __name__ == "__main__":
    sys.exit(main())
