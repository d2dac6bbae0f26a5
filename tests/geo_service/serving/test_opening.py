"""Opening a claimed slot (geo_service.serving.opening.open_slot), on its own and from both paths that use it, against a
moto server."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from geo_testkit import Resources, make_spec, publish_spec, set_active, set_plan

import geo_service.serving.carry
import geo_service.worker
from geo_service.adapters.aws import Clients
from geo_service.adapters.timebase import SYSTEM
from geo_service.leases.lease import LeaseLost, LeaseManager
from geo_service.pipeline.cost import Calibration
from geo_service.runtime.lifecycle import OpeningState, WorkerState
from geo_service.runtime.protection import ScaleInProtection
from geo_service.runtime.status import StatusBoard, WorkerStatus
from geo_service.serving.context import WorkerContext
from geo_service.serving.opening import OpenWatch, open_slot
from geo_service.serving.slots import Slot
from geo_service.worker import GeoWorker
from geokernel.partition_spec.model import Spec

FAST_CAL = Calibration(seconds_per_unit=0.004)
A, B = "0123", "3210"  # two zoom-4 quadkeys


class Counting:
    """A transform that loads one item per quadkey of its region; ``for_region`` counts what a new region adds."""

    def __init__(self) -> None:
        self.region: set[str] = set()
        self.loaded = 0
        self.gained: int | None = None

    def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None:
        self.region, self.loaded = set(quadkeys), len(set(quadkeys))

    def apply(self, event: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    def for_region(self, quadkeys: Sequence[str], buffer_ring: int) -> Counting:
        out = Counting()
        out.load_region(quadkeys, buffer_ring)
        out.gained = len(out.region - self.region)
        return out


def _ctx(clients: Clients, res: Resources) -> WorkerContext:
    status = WorkerStatus(state=WorkerState.STARTING, version=1, owner="opener")
    return WorkerContext(res.config(1), clients, owner="opener", clock=SYSTEM.time, timebase=SYSTEM,
                         transform_factory=Counting, calibration=FAST_CAL, protection=ScaleInProtection(None),
                         board=StatusBoard(status))


def _spec(res: Resources, version: int = 1) -> Spec:
    return make_spec(version, [[A, B], [""]], stream_name=f"{res.prefix}-geo-v{version}")


def _claimed(clients: Clients, res: Resources, version: int = 1, worker_id: str = "w0001") -> LeaseManager:
    manager = LeaseManager(clients.dynamodb, res.leases_table, version, "opener", 30.0)
    assert manager.claim(worker_id) is not None
    return manager


def _watch(states: list[OpeningState], **overrides: Any) -> OpenWatch:
    base: dict[str, Any] = {"stop": SYSTEM.event(), "retry_s": 0.05,
                            "on_state": lambda state, spec: states.append(state)}
    return OpenWatch(**{**base, **overrides})


def test_open_slot_waits_for_the_stream_warms_and_marks_the_lease_ready(clients: Clients,
                                                                        resources: Resources) -> None:
    # GIVEN a published spec with its stream, and a claimed lease of slot w0001
    publish_spec(clients, resources, _spec(resources))
    ctx, manager, states = _ctx(clients, resources), _claimed(clients, resources), []
    # WHEN the slot is opened
    slot = open_slot(ctx, manager, _watch(states))
    # THEN it went through waiting_stream and warming, holds one reader of its shard and its region, and is ready
    assert states == [OpeningState.WAITING_STREAM, OpeningState.WARMING]
    assert slot is not None and not slot.carried
    assert (slot.version, slot.worker_id, slot.region) == (1, "w0001", (A, B))
    assert len(slot.consumers) == 1 and slot.places_loaded == 2 and slot.places_gained == 2
    assert slot.stream == f"{resources.prefix}-geo-v1"
    st = manager.read("w0001")
    assert st is not None and st.ready and st.owner == "opener"


def test_open_slot_gives_up_when_stopped_or_dropped_while_the_stream_is_missing(clients: Clients,
                                                                                resources: Resources) -> None:
    # GIVEN a spec whose stream manifest is not published
    publish_spec(clients, resources, _spec(resources), create_stream=False)
    ctx = _ctx(clients, resources)
    stopped, dropped = SYSTEM.event(), SYSTEM.event()
    stopped.set()
    for flag, why in ((stopped, "stop"), (dropped, "dropped")):
        manager, states, waits = _claimed(clients, resources), [], []
        # WHEN the opening is stopped, or told the version will never go live
        slot = open_slot(ctx, manager, _watch(states, stop=flag, dropped=lambda why=why: why == "dropped",
                                              on_wait=waits.append))
        # THEN it gives up in waiting_stream and leaves the lease unready (the caller releases it)
        assert slot is None, why
        assert states == [OpeningState.WAITING_STREAM]
        st = manager.read("w0001")
        assert st is not None and not st.ready
        assert waits == []  # a dropped version is given up before waiting
        manager.release()


def test_open_slot_stops_before_ready_when_told_and_lets_a_lost_lease_through(clients: Clients,
                                                                              resources: Resources) -> None:
    # GIVEN a published spec with its stream
    publish_spec(clients, resources, _spec(resources))
    ctx = _ctx(clients, resources)
    # WHEN the last say before ready is no
    manager, states = _claimed(clients, resources), []
    warmed: list[bool] = []
    slot = open_slot(ctx, manager, _watch(states, go_on=lambda: False, warmed=lambda: warmed.append(True)))
    # THEN the slot warmed but was not opened, and the lease is not ready
    assert slot is None and states[-1] == OpeningState.WARMING and warmed == [True]
    st = manager.read("w0001")
    assert st is not None and not st.ready
    manager.release()

    # WHEN the lease check raises LeaseLost
    def lost() -> None:
        raise LeaseLost("taken over")

    with pytest.raises(LeaseLost, match="taken over"):
        open_slot(ctx, _claimed(clients, resources), _watch([], check=lost))


def test_a_carried_slot_builds_its_transform_from_the_served_one(clients: Clients, resources: Resources) -> None:
    # GIVEN v2, where slot w0001 owns A and B, and the transform of a v1 slot that owned A
    publish_spec(clients, resources, _spec(resources, 2))
    served = Counting()
    served.load_region([A], 1)
    # WHEN the v2 slot is opened from it
    slot = open_slot(_ctx(clients, resources), _claimed(clients, resources, 2), _watch([]), base=served,
                     carried=True)
    # THEN only B was gained, and the slot is marked carried
    assert slot is not None and slot.carried
    assert (slot.places_loaded, slot.places_gained) == (2, 1)


def test_the_worker_and_its_carry_over_both_open_slots_with_open_slot(clients: Clients, resources: Resources,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN v1 active (one slot) and v2 keeping it, every open_slot call recorded
    opened: list[tuple[str, int, bool]] = []

    def recording(path: str) -> Any:
        def record(ctx: WorkerContext, manager: LeaseManager, watch: OpenWatch, *, base: Any = None,
                   carried: bool = False) -> Slot | None:
            slot = open_slot(ctx, manager, watch, base=base, carried=carried)
            opened.append((path, manager.version, slot is not None and slot.carried == carried))
            return slot
        return record

    monkeypatch.setattr(geo_service.worker, "open_slot", recording("worker"))
    monkeypatch.setattr(geo_service.serving.carry, "open_slot", recording("carry"))
    for version in (1, 2):
        publish_spec(clients, resources, make_spec(version, [[""]], stream_name=f"{resources.prefix}-geo-v{version}",
                                                   previous=version - 1 or None))
    set_active(clients, resources, 1)
    worker = GeoWorker(resources.config(1, swap_mode="carry", worker_id="w0001"), clients, calibration=FAST_CAL,
                       transform_factory=Counting)
    # WHEN the worker opens its v1 slot and the plan then keeps the slot in v2
    worker.wait_ready(timeout=60)
    set_plan(clients, resources, 1, 2)
    worker.run_until(lambda s: s.next_version == 2, timeout=30)
    deadline = time.monotonic() + 30
    while len(opened) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.stop()
    # THEN the slot was opened by the worker's path and the next version by the carry-over's, both with open_slot
    assert opened == [("worker", 1, True), ("carry", 2, True)]
