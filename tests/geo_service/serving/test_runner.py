"""How long a slot runner pauses after a step that read nothing (geo_service.serving.runner.SlotRunner._idle_wait)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from geo_service.entity.handoff import EntityGate, Wanted
from geo_service.entity.store import EntityStates
from geo_service.pipeline.buffer import OutputBuffer
from geo_service.runtime.config import WorkerConfig
from geo_service.serving.runner import SlotRunner

NOW = 100.0


def runner(gate: EntityGate | None, next_fetch: float) -> SlotRunner:
    cfg = WorkerConfig(spec_version=1, control_table="c", leases_table="l", specs_bucket="s", costs_bucket="k",
                       output_bucket="o", poll_interval_s=1.0)
    ctx: Any = SimpleNamespace(config=cfg, timebase=SimpleNamespace(monotonic=lambda: NOW))
    slot: Any = SimpleNamespace(output=OutputBuffer(), reader=None, gate=gate, next_fetch=next_fetch, publishing=False)
    return SlotRunner(ctx, slot)


def idle_wait(r: SlotRunner) -> float:
    batch: Any = SimpleNamespace(spaced=False)
    companion: Any = SimpleNamespace(prepared=None, opening=None)
    return r._idle_wait(batch, companion)


def test_a_slot_holding_an_entity_for_a_handed_over_state_wakes_for_its_next_fetch_not_the_next_poll() -> None:
    # GIVEN a slot whose gate holds an entity waiting for its state from another slot, next fetch in 0.25 s
    gate = EntityGate(EntityStates("t"), label="v2#w0001")
    gate.wanted["car-1"] = Wanted(n=3, prev="v1#w0002", since=NOW - 0.1, local=False)
    # WHEN the step read nothing
    wait = idle_wait(runner(gate, next_fetch=NOW + 0.25))
    # THEN it pauses until that fetch, not the whole 1 s poll interval
    assert wait == 0.25


def test_a_slot_holding_nothing_pauses_a_whole_poll_interval() -> None:
    # GIVEN a stateful slot that holds no entity, and a stateless one
    for gate in (EntityGate(EntityStates("t"), label="v2#w0001"), None):
        # WHEN the step read nothing
        wait = idle_wait(runner(gate, next_fetch=NOW + 0.25))
        # THEN it pauses the poll interval
        assert wait == 1.0
