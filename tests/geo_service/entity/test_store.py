"""Entity state of stateful transforms (geo_service.entity.store) and the interface (geo_service.pipeline.transform, geo_service.serving.batches)."""

from __future__ import annotations

import json
import sys
import time
import types
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from geo_testkit import make_spec

from geo_service.entity.store import MAX_STATE_BYTES, EntityStates
from geo_service.pipeline.consumer import Batch, KinesisRecord
from geo_service.pipeline.cost import Calibration, CostTracker
from geo_service.pipeline.transform import (
    Applied,
    JsonValue,
    ReverseGeocoder,
    StatefulTransform,
    TransformError,
    load_transform,
    stateful_of,
)
from geo_service.serving.batches import BatchProcessor
from geo_service.serving.rows import apply_of
from geo_service.serving.slots import Slot


class Counter:
    """A stateful transform: counts each entity's events; ``pad`` bytes of padding make its state big."""

    stateful = True

    def __init__(self, pad: int = 0) -> None:
        self.pad = pad

    def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None:
        self.region = tuple(quadkeys)

    def apply(self, event: Mapping[str, Any]) -> dict[str, Any]:
        return self.apply_stateful(event, None).fields

    def apply_stateful(self, event: Mapping[str, Any], state: JsonValue) -> Applied:
        n = (state["n"] if isinstance(state, dict) else 0) + 1
        return Applied({"n": n, "seen": event["event_id"]}, {"n": n, "pad": "x" * self.pad})


class Plain:
    def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None: ...

    def apply(self, event: Mapping[str, Any]) -> dict[str, Any]:
        return {"plain": True}


@pytest.fixture
def module(monkeypatch: pytest.MonkeyPatch) -> str:
    mod = types.ModuleType("state_test_transforms")
    mod.Counter = Counter  # type: ignore[attr-defined]
    mod.Plain = Plain  # type: ignore[attr-defined]

    class Half:  # says stateful but has no apply_stateful
        stateful = True

        def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None: ...

        def apply(self, event: Mapping[str, Any]) -> dict[str, Any]:
            return {}

    mod.Half = Half  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "state_test_transforms", mod)
    return "state_test_transforms"


def test_the_store_keeps_json_copies_and_forgets_on_none() -> None:
    # GIVEN a store with one entity's state
    s = EntityStates("m:T")
    value = {"zones": {"A": 1}, "last": [1.5, 2]}
    s.put("e1", value)
    # WHEN the value is changed in place and read back
    value["zones"]["A"] = 99
    got = s.get("e1")
    got["zones"]["A"] = 7  # type: ignore[index]
    # THEN the store kept the value as it was put, and hands out fresh copies
    assert s.get("e1") == {"zones": {"A": 1}, "last": [1.5, 2]} and "e1" in s and len(s) == 1
    assert list(s.items()) == [("e1", '{"zones":{"A":1},"last":[1.5,2]}')]
    # AND None forgets the entity
    s.put("e1", None)
    assert s.get("e1") is None and len(s) == 0


def test_a_state_over_the_limit_is_refused_naming_entity_transform_and_size() -> None:
    # GIVEN a store holding a small state for an entity
    s = EntityStates("transforms.x:Big")
    s.put("car-7", {"n": 1})
    # WHEN a state of MAX_STATE_BYTES + 1 bytes of JSON is put
    big = "x" * (MAX_STATE_BYTES - 1)  # '"' + 4095 x + '"' = 4097 bytes
    with pytest.raises(TransformError) as err:
        s.put("car-7", big)
    # THEN the error names the entity, the transform and the size, and the old state is kept
    assert "'car-7'" in str(err.value) and "'transforms.x:Big'" in str(err.value) and "4097 bytes" in str(err.value)
    assert s.get("car-7") == {"n": 1}
    # AND exactly the limit fits
    s.put("car-7", "x" * (MAX_STATE_BYTES - 2))
    assert len(s.get("car-7")) == MAX_STATE_BYTES - 2  # type: ignore[arg-type]


def test_a_state_that_is_not_json_is_refused() -> None:
    # GIVEN a store
    s = EntityStates("m:T")
    # WHEN states that JSON cannot hold are put
    # THEN each is refused, naming the entity
    for bad in ({"s": {1, 2}}, float("nan")):
        with pytest.raises(TransformError, match="'e' from transform 'm:T' is not JSON"):
            s.put("e", bad)  # type: ignore[arg-type]
    assert s.get("e") is None


def test_load_transform_accepts_both_kinds_and_rejects_a_half_stateful_one(module: str) -> None:
    # GIVEN a stateful and a stateless transform class
    # WHEN each is loaded by name
    counter, plain = load_transform(f"{module}:Counter"), load_transform(f"{module}:Plain")
    # THEN the stateful one is recognised as such and the stateless one is not
    assert isinstance(counter, StatefulTransform) and stateful_of(counter) is counter
    assert stateful_of(plain) is None and stateful_of(ReverseGeocoder()) is None
    # AND a class that says stateful without apply_stateful is refused, naming it
    with pytest.raises(TransformError, match="'Half' says stateful = True but lacks apply_stateful"):
        load_transform(f"{module}:Half")


def _slot(transform: Any) -> Slot:
    return Slot(None, make_spec(1, [[""]], stream_name="s"), "w0001", "s", [], (), transform, ("",), 0, 0)  # type: ignore[arg-type]


def _batch(events: list[dict[str, Any]]) -> Batch:
    return Batch("sh", tuple(KinesisRecord("sh", str(i), "k", json.dumps(e).encode()) for i, e in enumerate(events)),
                 0, False)


def _processor() -> tuple[BatchProcessor, CostTracker]:
    proc = BatchProcessor(None, "o", "q", "c", 12, "me", wall=time.time, monotonic=time.monotonic)  # type: ignore[arg-type]
    return proc, CostTracker(Calibration(seconds_per_unit=0.004), 12, 1e9)


def test_the_stateless_path_calls_the_transforms_own_apply() -> None:
    # GIVEN a slot serving the (stateless) reverse geocoder
    g = ReverseGeocoder()
    slot = _slot(g)
    # WHEN the processor picks the per-event call
    call = apply_of(slot)
    # THEN it is the geocoder's own bound apply (no wrapper) and the slot holds no store
    assert call == g.apply and getattr(call, "__self__", None) is g and slot.states is None


def test_a_stateful_transform_sees_each_entitys_state_in_processing_order() -> None:
    # GIVEN a slot serving a counting stateful transform
    slot = _slot(Counter())
    proc, tracker = _processor()
    events = [{"event_id": f"e{i}", "entity_id": f"car-{i % 2}", "ts": 1_700_000_000_000 + i, "lat": 48.8,
               "lon": 2.3} for i in range(5)]
    # WHEN two batches are processed
    proc.process(_batch(events[:3]), slot, tracker)
    proc.process(_batch(events[3:]), slot, tracker)
    # THEN each entity's count follows its own events, across batches
    rows = [json.loads(line) for line in slot.output.lines]
    assert [(r["entity_id"], r["n"]) for r in rows] == [("car-0", 1), ("car-1", 1), ("car-0", 2), ("car-1", 2),
                                                        ("car-0", 3)]
    assert slot.states is not None and slot.states.get("car-0") == {"n": 3, "pad": ""}


def test_an_event_whose_state_is_too_big_is_quarantined_and_the_entity_keeps_its_state() -> None:
    # GIVEN a stateful transform whose state is over the limit
    slot = _slot(Counter(pad=MAX_STATE_BYTES))
    proc, tracker = _processor()
    # WHEN an event is processed
    result = proc.process(_batch([{"event_id": "e1", "entity_id": "car-9", "ts": 1795255500000, "lat": 1.0, "lon": 2.0}]), slot,
                          tracker)
    # THEN it is quarantined as a transform error naming entity, transform and size; no row, no state
    assert result.quarantined == 1 and result.events_out == 0 and not slot.output.lines
    reason = slot.output.bad[0]["reason"]
    assert reason.startswith("transform_error: TransformError: state of entity 'car-9'")
    assert "test_store:Counter" in reason and "over the limit of 4096" in reason
    assert slot.states is not None and slot.states.get("car-9") is None
