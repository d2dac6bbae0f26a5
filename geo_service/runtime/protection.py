"""ECS task scale-in protection from inside the task: on while the worker holds a lease, off when it holds none.

In ``carry`` mode the worker service scales by desired count (``lambdas.runtime.ecs.EcsService.scale``), and
ECS picks the tasks a scale-in stops. A task whose protection is on is not stopped by scale-in events of
the service (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-scale-in-protection.html), so
every task serving or preparing a slot protects itself, and a task that drained its last slot drops its
protection and waits to be stopped. The ECS agent injects ``ECS_AGENT_URI``; the request is
``PUT $ECS_AGENT_URI/task-protection/v1/state`` with ``{"ProtectionEnabled": bool, "ExpiresInMinutes": n}``
(1 to 2,880 minutes, 120 by default; repeating the call extends it), and the task role needs
``ecs:UpdateTaskProtection`` / ``ecs:GetTaskProtection``
(https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-scale-in-protection-endpoint.html).
Outside ECS (no ``ECS_AGENT_URI``) this does nothing.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from geo_service.adapters.logs import get_logger, log

PROTECTION_PATH = "/task-protection/v1/state"


class ScaleInProtection:
    """Keeps one task's scale-in protection in line with whether the worker holds a lease.

    Parameters
    ----------
    agent_uri : str or None
        ``ECS_AGENT_URI``; None disables every call.
    expires_minutes : int
        Protection period per call (ECS clears it afterwards, so a hung worker does not pin its task forever).
    renew_s : float
        While protected, the call is repeated this often (well inside ``expires_minutes``).
    send : callable, optional
        ``send(body) -> reply``: the request to the agent (default an HTTP ``PUT`` of ``body`` as JSON to
        ``agent_uri``; the scale simulation counts the calls instead).
    """

    def __init__(self, agent_uri: str | None, expires_minutes: int = 60, renew_s: float = 900.0,
                 clock: Callable[[], float] = time.monotonic, timeout_s: float = 3.0,
                 send: Callable[[dict[str, object]], object] | None = None) -> None:
        if not 1 <= expires_minutes <= 2880:
            raise ValueError(f"expires_minutes must be in [1, 2880], got {expires_minutes!r}")
        self.agent_uri = agent_uri.rstrip("/") if agent_uri else None
        self.expires_minutes = expires_minutes
        self.renew_s = renew_s
        self.clock = clock
        self.timeout_s = timeout_s
        self._send = send or self._put
        self.protected: bool | None = None  # last state the agent accepted
        self._sent_at = -float("inf")
        self.calls = 0
        self.log = get_logger()

    def hold(self, protect: bool) -> bool:
        """Turn protection on or off if it changed (or renew it when due); True when the agent has this state."""
        if self.agent_uri is None:
            return False
        due = protect and self.clock() - self._sent_at >= self.renew_s
        if self.protected == protect and not due:
            return True
        body: dict[str, object] = {"ProtectionEnabled": protect}
        if protect:
            body["ExpiresInMinutes"] = self.expires_minutes
        self.calls += 1
        try:
            reply = self._send(body)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            log(self.log, logging.WARNING, "scale_in_protection_failed", protect=protect, error=str(exc))
            return False
        failure = (reply.get("failure") or reply.get("error")) if isinstance(reply, dict) else None
        if failure:  # e.g. DEPLOYMENT_BLOCKED: more protected tasks than the desired count
            log(self.log, logging.WARNING, "scale_in_protection_refused", protect=protect, failure=failure)
            return False
        self.protected = protect
        self._sent_at = self.clock()
        log(self.log, logging.INFO, "scale_in_protection", protect=protect, expires_minutes=self.expires_minutes)
        return True

    def _put(self, body: dict[str, object]) -> object:
        assert self.agent_uri is not None
        req = urllib.request.Request(self.agent_uri + PROTECTION_PATH, data=json.dumps(body).encode(), method="PUT",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
            return json.loads(resp.read() or b"{}")
