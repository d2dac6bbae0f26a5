"""The worker's lifecycle tables (geo_service.runtime.lifecycle) and the setters that check them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from geo_service.adapters.aws import make_clients
from geo_service.adapters.timebase import SYSTEM
from geo_service.errors import GeoServiceError
from geo_service.leases.lease import LeaseManager
from geo_service.pipeline.cost import Calibration
from geo_service.runtime.config import WorkerConfig
from geo_service.runtime.lifecycle import (
    FINAL_STATES,
    OPENING_TRANSITIONS,
    WORKER_TRANSITIONS,
    IllegalTransition,
    OpeningState,
    WorkerState,
    check_transition,
)
from geo_service.runtime.protection import ScaleInProtection
from geo_service.runtime.status import StatusBoard, WorkerStatus
from geo_service.serving.carry import CarryOver
from geo_service.serving.context import WorkerContext

WORKER_EDGES = [(old, new) for old, targets in WORKER_TRANSITIONS.items() for new in sorted(targets)]
OPENING_EDGES = [(old, new) for old, targets in OPENING_TRANSITIONS.items() for new in sorted(targets)]


def _board(state: WorkerState) -> StatusBoard:
    return StatusBoard(WorkerStatus(state=state, version=1, owner="me"))


def _carry_over(state: OpeningState) -> CarryOver:
    """A carry-over that was never started, put in ``state`` (no AWS call is made)."""
    cfg = WorkerConfig(spec_version=1, control_table="c", leases_table="l", specs_bucket="s", costs_bucket="k",
                       output_bucket="o")
    clients = make_clients("http://127.0.0.1:9", "us-east-1")
    ctx = WorkerContext(cfg, clients, owner="me", clock=SYSTEM.time, timebase=SYSTEM, transform_factory=object,
                        calibration=Calibration(seconds_per_unit=0.004), protection=ScaleInProtection(None),
                        board=_board(WorkerState.READY))
    current: Any = SimpleNamespace(worker_id="w0001", version=1, transform=None)
    carry = CarryOver(ctx, current, 2, manager=LeaseManager(clients.dynamodb, "l", 2, "me", 3.0))
    carry._state = state  # the path there is covered by the worker tests; the setter is what is tested here
    return carry


def test_every_state_has_a_row_and_final_states_have_no_way_out() -> None:
    # GIVEN the two transition tables
    # THEN every state of each machine has a row, every target is a state of the same machine, final states are ends
    assert set(WORKER_TRANSITIONS) == set(WorkerState)
    assert set(OPENING_TRANSITIONS) == set(OpeningState)
    assert all(not WORKER_TRANSITIONS[s] for s in FINAL_STATES)
    assert all(WORKER_TRANSITIONS[s] for s in set(WorkerState) - FINAL_STATES)
    assert all(t in WorkerState for ts in WORKER_TRANSITIONS.values() for t in ts)
    assert all(t in OpeningState for ts in OPENING_TRANSITIONS.values() for t in ts)


@pytest.mark.parametrize(("old", "new"), WORKER_EDGES, ids=[f"{o}->{n}" for o, n in WORKER_EDGES])
def test_the_status_board_accepts_every_legal_worker_transition(old: WorkerState, new: WorkerState) -> None:
    # GIVEN a worker status in state ``old``
    board = _board(old)
    # WHEN the state changes to ``new`` (with other fields)
    board.set(state=new, ready=False)
    # THEN the status holds it
    assert board.get().state is new and board.get().ready is False


@pytest.mark.parametrize("state", list(WorkerState))
def test_setting_the_current_state_again_is_not_a_transition(state: WorkerState) -> None:
    board = _board(state)
    board.set(state=str(state))  # a plain string names the state too
    assert board.get().state is state


@pytest.mark.parametrize(("old", "new"), [(WorkerState.READY, WorkerState.IDLE),
                                          (WorkerState.STARTING, WorkerState.READY),
                                          (WorkerState.DRAINED, WorkerState.CLAIMING),
                                          (WorkerState.FAILED, WorkerState.RELEASED)])
def test_an_illegal_worker_transition_raises_naming_both_states(old: WorkerState, new: WorkerState) -> None:
    # GIVEN a worker status in state ``old``
    board = _board(old)
    # WHEN it is set to a state the table does not allow from there
    with pytest.raises(IllegalTransition, match=f"cannot go from '{old}' to '{new}'") as info:
        board.set(state=new, ready=True)
    # THEN the error is the package's, and the status is unchanged
    assert isinstance(info.value, GeoServiceError)
    assert board.get().state is old and board.get().ready is False


@pytest.mark.parametrize(("old", "new"), OPENING_EDGES, ids=[f"{o}->{n}" for o, n in OPENING_EDGES])
def test_a_carry_over_accepts_every_legal_opening_transition(old: OpeningState, new: OpeningState) -> None:
    carry = _carry_over(old)
    carry.state = new
    assert carry.state is new


@pytest.mark.parametrize(("old", "new"), [(OpeningState.READY, OpeningState.CANCELLED),
                                          (OpeningState.CLAIMING, OpeningState.READY),
                                          (OpeningState.CANCELLED, OpeningState.WARMING)])
def test_an_illegal_opening_transition_raises_naming_both_states(old: OpeningState, new: OpeningState) -> None:
    carry = _carry_over(old)
    with pytest.raises(IllegalTransition, match=f"OpeningState cannot go from '{old}' to '{new}'"):
        carry.state = new
    assert carry.state is old


def test_check_transition_names_the_allowed_targets() -> None:
    with pytest.raises(IllegalTransition, match=r"allowed from 'warming': \['cancelled', 'failed', 'ready'\]"):
        check_transition(OPENING_TRANSITIONS, OpeningState.WARMING, OpeningState.CLAIMING)
