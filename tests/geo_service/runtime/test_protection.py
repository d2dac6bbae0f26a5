"""ECS task scale-in protection from inside the task, against a local stand-in for the agent endpoint."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from geo_testkit import Resources, make_spec, publish_spec, set_active

from geo_service.adapters.aws import Clients
from geo_service.leases.lease import LeaseManager
from geo_service.pipeline.cost import Calibration
from geo_service.runtime.protection import PROTECTION_PATH, ScaleInProtection
from geo_service.worker import GeoWorker


class Agent:
    """Records the PUTs to ``/task-protection/v1/state`` and answers like the ECS agent (or with a failure)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.failure: str | None = None
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                agent.calls.append((self.path, body))
                reply = ({"failure": {"Arn": "arn:task", "Reason": agent.failure}} if agent.failure else
                         {"protection": {"ProtectionEnabled": body["ProtectionEnabled"], "TaskArn": "arn:task"}})
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}/api/task-1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def states(self) -> list[bool]:
        return [bool(body["ProtectionEnabled"]) for _path, body in self.calls]


@pytest.fixture()
def agent() -> Iterator[Agent]:
    a = Agent()
    yield a
    a.server.shutdown()


def test_protection_is_set_on_change_and_renewed_when_due(agent: Agent) -> None:
    # GIVEN the protection client on a controllable clock
    now = [0.0]
    p = ScaleInProtection(agent.uri, expires_minutes=30, renew_s=600, clock=lambda: now[0])
    # WHEN held on three times, then off, then on again after the renewal period
    results = [p.hold(True), p.hold(True), p.hold(True)]
    now[0] = 700
    p.hold(True)
    p.hold(False)
    p.hold(False)
    # THEN one PUT per change or renewal, on the agent's task-protection path, with the expiry when protecting
    assert results == [True, True, True]
    assert agent.states == [True, True, False]
    assert {path for path, _ in agent.calls} == {"/api/task-1" + PROTECTION_PATH}
    assert agent.calls[0][1] == {"ProtectionEnabled": True, "ExpiresInMinutes": 30}
    assert agent.calls[2][1] == {"ProtectionEnabled": False}


def test_a_refused_protection_is_reported_and_retried(agent: Agent) -> None:
    # GIVEN the agent refuses (more protected tasks than the desired count)
    agent.failure = "DEPLOYMENT_BLOCKED"
    p = ScaleInProtection(agent.uri)
    # WHEN protection is asked twice THEN both fail (nothing is assumed) and both were sent
    assert (p.hold(True), p.hold(True)) == (False, False) and len(agent.calls) == 2 and p.protected is None


def test_without_an_agent_nothing_is_sent() -> None:
    # GIVEN no ECS_AGENT_URI (outside ECS) WHEN held THEN no call is made
    p = ScaleInProtection(None)
    assert p.hold(True) is False and p.calls == 0


def test_a_worker_is_protected_while_it_holds_a_lease_and_not_after(agent: Agent, clients: Clients,
                                                                   resources: Resources) -> None:
    # GIVEN v1 active (one slot) and a generic carry-mode worker in an ECS task (ECS_AGENT_URI set)
    for version in (1, 2):
        publish_spec(clients, resources, make_spec(version, [[""]], stream_name=f"{resources.prefix}-geo-v{version}"))
    set_active(clients, resources, 1)
    cfg = resources.config(None, swap_mode="carry", agent_uri=agent.uri)
    w = GeoWorker(cfg, clients, calibration=Calibration(seconds_per_unit=0.004))
    # WHEN it serves v1#w0001
    w.wait_ready(timeout=60)
    # THEN its task is protected
    assert agent.states and agent.states[-1] is True
    # WHEN v2 goes live with its slot held by another process, so this worker drains v1 and has nothing to hold
    LeaseManager(clients.dynamodb, resources.leases_table, 2, "other", 60.0).claim("w0001")
    set_active(clients, resources, 2)
    w.run_until(lambda s: s.slots_served == 1 and s.state == "claiming" and s.worker_id is None, timeout=30)
    # THEN its protection is off, so a scale-in may stop this task (and only such tasks)
    w.run_until(lambda s: agent.states[-1] is False, timeout=10)
    assert agent.states.count(True) >= 1
    w.stop()
