"""Keep an idle fleet on the live spec and the stack's code.

:func:`reconcile_fleet` (``whole`` mode): ECS rolls a blue/green deployment back when a lifecycle hook fails or
times out or the circuit breaker trips, whatever the hook would have answered. Before the flip that only ends the
swap early: the controller marks the version rolled back at once (instead of after ``GREEN_TIMEOUT_S``) and blue
keeps serving. After the flip the service runs the previous ``SPEC_VERSION`` while the router follows the live
one: deploy the live one again, at once, even while blue is still draining.

:func:`redeploy_live_spec`: roll new worker code out to an idle fleet by redeploying the live spec as a new version.

A ``cdk deploy`` that changes the worker image or its settings registers a new revision of the worker task
definition but does not touch the service (``infra/workers.py``): the deployer learns the revision from
``WORKER_TASK_DEFINITION`` and the controller plans the next swap ``whole`` while the fleet runs other code
(:meth:`lambdas.deploy.controller.DeployController.start_fleet`). When no next swap is coming (the deployment is
finished, nothing is queued and ``desired`` is the live version), :func:`redeploy_live_spec` publishes a copy of
the live spec under the next version number (``specs/v<n+1>.json`` with ``If-None-Match``, then ``desired``
moved forward, as the partitioner publishes) and requests it: that swap is an ordinary blue/green one, so green
is proven before the flip and blue drains before it stops.

One attempt per template revision (control ``pk="code"`` remembers it): if that swap rolls back (the new code
never got ready), the fleet stays on the old code and the deployer does not loop; the next spec the partitioner
publishes is planned ``whole`` and tries the new code again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Protocol, runtime_checkable

from geokernel.contracts.control import ControlKey, DeployStatus
from geokernel.contracts.plan import SwapMode
from geokernel.contracts.spec_pointer import DesiredPointer, spec_key
from geokernel.contracts.stream import geo_stream_name
from lambdas.deploy.controller import DeployController
from lambdas.runtime.records import read_active, read_desired, to_item
from lambdas.runtime.s3 import SpecExists
from lambdas.runtime.timestamps import now_iso


def redeploy_live_spec(ctl: DeployController, template: str, clock: Callable[[], float]) -> int | None:
    """Publish and request a copy of the live spec as version ``desired + 1`` if the fleet runs stale code and
    nothing else would replace it; return that version, or None when nothing was done."""
    st = ctl.state()
    if not template or st.in_flight or st.queued_version is not None:
        return None
    active, desired = read_active(ctl.control), read_desired(ctl.control)
    if active is None or desired is None or desired.version != active.version:
        return None  # nothing live yet, or a newer spec is on its way (it will carry the code)
    mark = ctl.control.get(ControlKey.CODE)
    if mark is not None and mark.get("template") == template:
        return None
    if not ctl.code_stale():
        return None
    live = ctl.spec(active.version)
    n = desired.version + 1
    copy = live.replace(version=n, previous_version=live.version, stream_name=geo_stream_name(ctl.prefix, n),
                        created_at=now_iso(clock()))
    ctl.control.put(ControlKey.CODE, {"template": template, "version": n, "from_version": live.version, "at": clock()})
    try:
        ctl.specs.put_new(copy)
    except SpecExists:  # the partitioner published v<n> meanwhile: that swap carries the code
        return None
    if not ctl.control.put_forward(ControlKey.DESIRED, to_item(DesiredPointer(n, spec_key(n), now_iso(clock())))):
        return None
    ctl.request(n)
    return n


class Reconciled(StrEnum):
    """What :func:`reconcile_fleet` did."""

    ROLLED_BACK = "rolled_back"  # ECS rolled the in-flight version back before its flip: marked rolled back
    REDEPLOYED = "redeployed"  # the service ran another version than the live one: the live one deployed again


@runtime_checkable
class ReconcilableFleet(Protocol):
    """The part of a ``whole``-mode fleet :func:`reconcile_fleet` needs (:class:`EcsFleet`, ``local.fleet.LocalFleet``)."""

    def rolled_back(self, version: int) -> bool: ...

    def reconcile(self, version: int, worker_ids: Sequence[str]) -> bool: ...

    def serves(self, version: int) -> bool: ...

    def target_version(self) -> int | None: ...


def may_start(ctl: DeployController) -> bool:
    """May the controller start a new swap now? ``whole`` mode: only while the service runs the live version's
    revision with no deployment rolling out or back.

    After ECS rolled the live version's deployment back (a hook timed out after the flip), the live version has no
    running worker until :func:`reconcile_fleet` deployed it again. A swap started meanwhile would drain a version
    no worker reads: its records would stay in its stream. So the next swap waits for the live fleet to be back.
    """
    fleet = ctl.fleet
    if ctl.swap_mode is not SwapMode.WHOLE or not isinstance(fleet, ReconcilableFleet):
        return True
    active = read_active(ctl.control)
    return active is None or fleet.serves(active.version)


def reconcile_fleet(ctl: DeployController) -> Reconciled | None:
    """``whole`` mode: match the controller to what ECS did with its deployments (see the module docstring).

    * ``waiting_green`` and the fleet says ECS rolled the version back (:meth:`lambdas.deploy.fleet.EcsFleet.rolled_back`) before the
      active pointer reached it: :meth:`DeployController.fail` (its stream deleted, never retried; blue serves).
    * nothing in flight, or in flight past the flip: :meth:`lambdas.deploy.fleet.EcsFleet.reconcile` deploys the live version again if
      the service runs another one.
    """
    fleet = ctl.fleet
    if ctl.swap_mode is not SwapMode.WHOLE or not isinstance(fleet, ReconcilableFleet):
        return None
    st = ctl.state()
    active = read_active(ctl.control)
    v = st.version
    if (st.status == DeployStatus.WAITING_GREEN and v is not None and ctl.fleet_started(v, st.old_version)
            and not ctl.flipped(v) and fleet.rolled_back(v)):
        ctl.fail(st, f"ECS rolled the deployment of v{v} back before the flip (a lifecycle hook failed or timed out): "
                     f"v{st.old_version} keeps serving")
        return Reconciled.ROLLED_BACK
    if active is None or (st.in_flight and (v is None or v > active.version)):
        return None  # before the flip the service is meant to run the version in flight
    if fleet.reconcile(active.version, [w.id for w in ctl.spec(active.version).workers]):
        return Reconciled.REDEPLOYED
    return None
