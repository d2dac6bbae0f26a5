"""The geo worker's lifecycle as explicit state machines: the states, and every transition allowed between them.

Two machines:

* :class:`WorkerState` is the worker process's state (``WorkerStatus.state``, the ``/health`` body's ``state``):
  where the process is in claiming, opening and serving its slots (:data:`WORKER_TRANSITIONS`).
* :class:`OpeningState` is the state of a slot the process opens **ahead** while it serves another one (a
  carry-over, :mod:`geo_service.serving.carry`; :data:`OPENING_TRANSITIONS`).

A slot is opened the same way on both paths (:func:`geo_service.serving.opening.open_slot`): ``waiting_stream`` (its
version's geo stream is not published yet) then ``warming`` (the transform loads its region), then ``ready``.

The state setters check every change against these tables (:func:`check_transition`): a change the table does not
list raises :class:`IllegalTransition` naming both states. Setting the state a machine is already in is not a
transition and is always accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar

from geo_service.errors import GeoServiceError


class WorkerState(StrEnum):
    """Where a worker process is (``WorkerStatus.state``); see :mod:`geo_service.worker` for the whole lifecycle."""

    STARTING = "starting"
    CLAIMING = "claiming"
    IDLE = "idle"  # a generic worker that found no slot to claim
    WAITING_STREAM = "waiting_stream"
    WARMING = "warming"
    WAITING_PREVIOUS = "waiting_previous"  # the handover gate holds the slot's first records
    READY = "ready"
    DRAINING = "draining"
    DRAINED = "drained"
    RELEASED = "released"
    RETIRED = "retired"
    ABANDONED = "abandoned"
    FAILED = "failed"


FINAL_STATES = frozenset({WorkerState.DRAINED, WorkerState.RELEASED, WorkerState.RETIRED, WorkerState.ABANDONED,
                          WorkerState.FAILED})

#: Stopping on request (``released``, or ``abandoned`` when the leases are left to expire) and failing are possible
#: from every state that is not final.
_STOPS = frozenset({WorkerState.RELEASED, WorkerState.ABANDONED, WorkerState.FAILED})
_W = WorkerState

#: Every state change a worker process may make. After a slot ends (drained, lost or dropped) the worker serves
#: the slot it carried over (``ready``) or claims again (``claiming``); a worker with nothing left to claim ends
#: ``drained`` if it drained a slot, ``retired`` otherwise.
WORKER_TRANSITIONS: Mapping[WorkerState, frozenset[WorkerState]] = {
    _W.STARTING: _STOPS | {_W.CLAIMING},
    _W.CLAIMING: _STOPS | {_W.IDLE, _W.WAITING_STREAM, _W.DRAINED, _W.RETIRED},
    _W.IDLE: _STOPS | {_W.WAITING_STREAM},
    _W.WAITING_STREAM: _STOPS | {_W.WARMING, _W.CLAIMING},
    _W.WARMING: _STOPS | {_W.READY, _W.CLAIMING},
    _W.WAITING_PREVIOUS: _STOPS | {_W.READY, _W.DRAINING, _W.CLAIMING},
    _W.READY: _STOPS | {_W.WAITING_PREVIOUS, _W.DRAINING, _W.CLAIMING},
    _W.DRAINING: _STOPS | {_W.READY, _W.CLAIMING, _W.DRAINED},
    **{final: frozenset() for final in FINAL_STATES},
}


class OpeningState(StrEnum):
    """Where a slot opened ahead (a carry-over) is: ``CarryOver.state``."""

    CLAIMING = "claiming"
    WAITING_STREAM = "waiting_stream"
    WARMING = "warming"
    READY = "ready"
    FAILED = "failed"
    CANCELLED = "cancelled"


_O = OpeningState

#: Every state change of a slot opened ahead: it fails from any state before ``ready``, and is cancelled (the plan
#: dropped it, or the worker stops) from any state but ``ready`` (a ready slot stays ready: it was served).
OPENING_TRANSITIONS: Mapping[OpeningState, frozenset[OpeningState]] = {
    _O.CLAIMING: frozenset({_O.WAITING_STREAM, _O.FAILED, _O.CANCELLED}),
    _O.WAITING_STREAM: frozenset({_O.WARMING, _O.FAILED, _O.CANCELLED}),
    _O.WARMING: frozenset({_O.READY, _O.FAILED, _O.CANCELLED}),
    _O.READY: frozenset(),
    _O.FAILED: frozenset({_O.CANCELLED}),
    _O.CANCELLED: frozenset(),
}


S = TypeVar("S", bound=StrEnum)


class IllegalTransition(GeoServiceError, RuntimeError):
    """A state change the lifecycle's transition table does not allow (names both states)."""


def check_transition(table: Mapping[S, frozenset[S]], old: S, new: S) -> S:
    """Return ``new`` if a machine in state ``old`` may go there by ``table`` (or stays in ``old``).

    Raises
    ------
    IllegalTransition
        If ``table`` does not allow ``old -> new``; the message names both states and the allowed targets.
    """
    if new == old or new in table[old]:
        return new
    allowed = sorted(str(s) for s in table[old])
    raise IllegalTransition(f"{type(old).__name__} cannot go from {str(old)!r} to {str(new)!r} "
                            f"(allowed from {str(old)!r}: {allowed!r})")
