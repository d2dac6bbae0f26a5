"""The /health endpoint and the container probe."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from geo_service import healthcheck
from geo_service.runtime.health import HealthServer
from local.aws import free_port


def _get(port: int, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status), dict(json.loads(resp.read()))
    except urllib.error.HTTPError as exc:
        return exc.code, dict(json.loads(exc.read()))


def test_health_reports_state_and_fails_when_worker_failed() -> None:
    # GIVEN a health server over a status that changes
    state = {"state": "ready", "worker_id": "w0001"}
    server = HealthServer(lambda: state, port=0, host="127.0.0.1")
    try:
        # WHEN it is probed while ready, after a failure, and on an unknown path
        ok = _get(server.port, "/health")
        probe_ok = healthcheck.probe(server.port)
        state["state"] = "failed"
        bad = _get(server.port, "/health")
        probe_bad = healthcheck.probe(server.port)
        missing = _get(server.port, "/nope")
    finally:
        server.close()
    # THEN 200 with the status JSON, then 503, and 404 naming the path; the probe follows
    assert ok == (200, {"state": "ready", "worker_id": "w0001"}) and probe_ok
    assert bad[0] == 503 and bad[1]["state"] == "failed" and not probe_bad
    assert missing[0] == 404 and "'/nope'" in missing[1]["error"]


@pytest.mark.parametrize(("port", "expected"), [("0", 0), ("", 0), ("eighty", 1), (None, 1)])
def test_probe_exit_codes(monkeypatch: pytest.MonkeyPatch, port: str | None, expected: int) -> None:
    # GIVEN HEALTH_PORT disabled, empty, malformed, or pointing at a port nobody serves
    monkeypatch.setenv("HEALTH_PORT", port if port is not None else str(free_port()))
    # WHEN the probe runs / THEN it reports healthy only when the endpoint is disabled
    assert healthcheck.main() == expected
