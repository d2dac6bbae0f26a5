"""``deployer-crash``: the deployer dies inside the next swap's fleet start, after it saved ``waiting_green``.

:class:`CrashingFleet` raises :class:`InjectedCrash` once; the driver (:class:`local.deploy.DeployDriver`) ends that
"invocation" like a Lambda that died. Nothing calls the fleet start again but the controller's resume on a later
step (:meth:`lambdas.deploy.controller.DeployController.resume_fleet`, after ``fleet_start_grace_s``; the schedule
in AWS). *Recovered* when that swap flipped (or a later one did): its fleet started by a later step, or its slots
carried by running workers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from local.errors import LocalRunError
from local.faults.record import FaultRecord, LiveSince


class InjectedCrash(LocalRunError, RuntimeError):
    """The deployer 'invocation' dies here (``deployer-crash``)."""


class CrashingFleet:
    """A fleet that raises :class:`InjectedCrash` in the first :meth:`start` after :meth:`arm`; else delegates."""

    def __init__(self, fleet: Any) -> None:
        self._fleet = fleet
        self.armed = False
        self.crashed_plan: tuple[int, int | None] | None = None

    def arm(self) -> None:
        self.armed = True

    def start(self, plan: Any) -> Any:
        if self.armed and self.crashed_plan is None:
            self.crashed_plan = (plan.to_version, plan.from_version)
            raise InjectedCrash(f"deployer died while starting the fleet of v{plan.to_version}")
        return self._fleet.start(plan)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fleet, name)


class DeployerCrash:
    """Follow one ``deployer-crash`` fault over a :class:`CrashingFleet` and the controller's state."""

    def __init__(self, fleet: CrashingFleet, fleet_started: Callable[[int, int | None], bool],
                 active_version: Callable[[], int | None], live_since: LiveSince, *, deadline_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.fleet = fleet
        self.fleet_started = fleet_started
        self.active_version = active_version
        self.live_since = live_since
        self.clock = clock
        self.record = FaultRecord("deployer-crash", deadline_s=deadline_s)

    def is_open(self) -> bool:
        """True from the crash itself (not from the loop's next poll, seconds later under load) until recovered."""
        return (self.fleet.crashed_plan is not None or self.record.injected_at is not None) and not self.record.recovered

    def poll(self) -> None:
        now = self.clock()
        if not self.fleet.armed:
            if self.live_since() is not None:
                self.fleet.arm()  # the next swap's fleet start dies
            return
        if self.fleet.crashed_plan is None:
            return
        version, old = self.fleet.crashed_plan
        if self.record.injected_at is None:
            self.record.injected_at = self.record.detected_at = now  # the invocation error is seen at once
            self.record.mid_swap = True
            self.record.target = f"deployer, inside the fleet start of v{version} (after saving waiting_green)"
        elif self.record.recovered_at is None:
            # the swap flipped (or a later one did): every slot of the plan was served, by a fleet a later step
            # started or, in carry mode, by running workers that carried the slots from the stored plan (then no
            # fleet start is recorded: seen under load, when the carried slots were ready before the resume's grace)
            active = self.active_version()
            if active is not None and active >= version:
                how = "started by a later step" if self.fleet_started(version, old) else "no fleet start recorded"
                self.record.took_over_by["fleet"] = f"{how}; active spec v{active} (the crashed swap was to v{version})"
                self.record.recovered_at = now
