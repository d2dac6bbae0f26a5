"""The oracle (local.oracle): a single-process reference run compared with the fleet's enriched records."""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from geo_service.pipeline.records import decode_event, enriched_record
from geo_service.pipeline.transform import Applied, JsonValue
from geokernel.contracts.enriched import EnrichedRecord
from local.oracle import compare, expected_fields, run_oracle


class Tag:
    """Stateless: tags each event with its latitude's sign."""

    def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None:
        self.region = tuple(quadkeys)

    def apply(self, event: Mapping[str, Any]) -> dict[str, Any]:
        return {"north": event["lat"] >= 0, "region": list(self.region)}


class Count(Tag):
    """Stateful: numbers each entity's events."""

    stateful = True

    def apply_stateful(self, event: Mapping[str, Any], state: JsonValue) -> Applied:
        n = (state if isinstance(state, int) else 0) + 1
        return Applied({"n": n}, n)


@pytest.fixture
def spec(monkeypatch: pytest.MonkeyPatch) -> str:
    mod = types.ModuleType("oracle_test_transforms")
    mod.Tag, mod.Count = Tag, Count  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "oracle_test_transforms", mod)
    return "oracle_test_transforms"


def _sent(n: int) -> list[dict[str, Any]]:
    return [{"event_id": f"e{i}", "entity_id": f"car-{i % 2}", "ts": 1_700_000_000_000 + i, "lat": -1.0 + i,
             "lon": 2.0} for i in range(n)]


def _record(event: dict[str, Any], added: dict[str, Any], processed_at: int = 1) -> EnrichedRecord:
    ev = decode_event(__import__("json").dumps(event).encode(), "test")
    row = enriched_record(ev, added, spec_version=1, partition_id="p1", worker_id="w1", stray=False,  # type: ignore[arg-type]
                          owner="o", processed_at=processed_at)
    return EnrichedRecord.from_dict(row, "test")


def test_a_fleet_that_matches_the_reference_has_no_difference(spec: str) -> None:
    # GIVEN three events and the records a correct (catch-all) worker wrote for them, one twice
    sent = _sent(3)
    records = [_record(e, {"north": e["lat"] >= 0, "region": [""]}) for e in sent]
    records.append(records[0])
    # WHEN the oracle runs the transform over the whole world and compares
    result = run_oracle(f"{spec}:Tag", sent, records)
    # THEN everything was compared and nothing differs
    assert (result.compared, result.missing, result.spurious, result.differing) == (3, 0, 0, 0)
    assert result.ok and not result.stateful and result.transform.endswith(":Tag") and result.seconds >= 0
    assert result.line().startswith("ORACLE OK: ") and "3 events compared" in result.line()


def test_missing_spurious_and_differing_records_are_counted_with_examples(spec: str) -> None:
    # GIVEN records where e1 is missing, e2's field differs and an unsent e9 appears
    sent = _sent(3)
    ok = {"north": False, "region": [""]}
    records = [_record(sent[0], ok), _record(sent[2], {"north": False, "region": [""]}),
               _record({**sent[0], "event_id": "e9"}, ok)]
    # WHEN compared
    result = run_oracle(f"{spec}:Tag", sent, records)
    # THEN one of each is found, and the example names the event, entity, field, expected and got
    assert (result.compared, result.missing, result.spurious, result.differing) == (2, 1, 1, 1)
    assert not result.ok and result.line().startswith("ORACLE FAILED")
    d = result.examples[0]
    assert (d.event_id, d.entity, d.field, d.expected, d.got) == ("e2", "car-0", "north", True, False)


def test_duplicates_that_disagree_are_a_difference(spec: str) -> None:
    # GIVEN two copies of e0: one right, one with a different transform field
    sent = _sent(1)
    records = [_record(sent[0], {"north": False, "region": [""]}), _record(sent[0], {"north": False, "region": ["0"]})]
    # WHEN compared
    result = run_oracle(f"{spec}:Tag", sent, records)
    # THEN the event differs and its duplicates are inconsistent
    assert result.differing == 1 and result.inconsistent_duplicates == 1 and not result.ok
    assert result.examples[0].field == "region" and result.examples[0].got == ["0"]


def test_a_stateful_reference_runs_in_send_order_and_flags_a_lost_state(spec: str) -> None:
    # GIVEN a stateful counting transform and a fleet where car-0 changed worker before its third event
    sent = _sent(5)  # car-0: e0, e2, e4; car-1: e1, e3
    counts = {"e0": 1, "e1": 1, "e2": 2, "e3": 2, "e4": 1}  # e4: the new worker started car-0 from no state
    records = [_record(e, {"n": counts[e["event_id"]]}, processed_at=10 + i) for i, e in enumerate(sent)]
    # WHEN compared
    result = run_oracle(f"{spec}:Count", sent, records)
    # THEN exactly e4 differs (expected 3, got 1) and order was kept
    assert result.stateful and result.differing == 1 and result.out_of_order == 0
    assert [(d.event_id, d.field, d.expected, d.got) for d in result.examples] == [("e4", "n", 3, 1)]


def test_an_entity_processed_against_send_order_in_one_slot_fails_the_run_stateful_or_not(spec: str) -> None:
    # GIVEN car-0's second event processed before its first (right values otherwise)
    sent = _sent(3)  # car-0: e0, e2
    transform = Count()
    transform.load_region([""], 1)
    expected = expected_fields(transform, sent)
    records = [_record(sent[0], {"n": 1}, processed_at=50), _record(sent[1], {"n": 1}, processed_at=20),
               _record(sent[2], {"n": 2}, processed_at=30)]
    # WHEN compared as a stateful and as a stateless transform
    stateful = compare(expected, records, transform="t", stateful=True)
    stateless = compare(expected, records, transform="t", stateful=False)
    # THEN the pair is counted (within one slot of one process) and fails both runs: a stateless transform's
    # downstream sees the entity's events in the wrong order too (it passed before: issue #56)
    assert stateful.out_of_order == stateless.out_of_order == 1 and stateful.same_slot_out_of_order == 1
    assert stateful.differing == 0 and not stateful.ok and not stateless.ok


def test_an_entity_read_by_two_workers_out_of_order_is_reported_but_not_a_slot_failure(spec: str) -> None:
    # GIVEN car-0's two events processed in the other order by two different slots (a region border between them)
    sent = _sent(3)
    transform = Count()
    transform.load_region([""], 1)
    expected = expected_fields(transform, sent)
    late = _record(sent[2], {"n": 2}, processed_at=30)
    records = [_record(sent[0], {"n": 1}, processed_at=50), _record(sent[1], {"n": 1}, processed_at=20),
               EnrichedRecord(late.event_id, late.spec_version, late.partition_id, "w2", late.stray, late.owner,
                              late.processed_at, late.fields)]
    # WHEN compared as a stateful transform
    result = compare(expected, records, transform="t", stateful=True)
    # THEN the pair is counted but not as within one slot, so it alone does not fail the run
    assert result.out_of_order == 1 and result.same_slot_out_of_order == 0 and result.ok
    # AND the report names the two records: which came first, from which slot, when
    (example,) = result.order_examples
    assert example.startswith(f"entity 'car-0': {sent[2]['event_id']!r} (v{late.spec_version} w2 ")
    assert "processed_at 30" in example and "processed_at 50" in example


def test_events_the_decoder_rejects_are_not_expected(spec: str) -> None:
    # GIVEN one valid event and one without lat
    sent = [*_sent(1), {"event_id": "bad", "entity_id": "x", "ts": 1, "lon": 2.0}]
    transform = Tag()
    transform.load_region([""], 1)
    # WHEN the reference run computes the expectations
    expected = expected_fields(transform, sent)
    # THEN only the valid one is expected, with the event's and the transform's fields (no routing ids)
    assert expected.order == ("e0",)
    assert expected.fields["e0"] == {"entity_id": "car-0", "ts": 1_700_000_000_000, "lat": -1.0, "lon": 2.0,
                                     "ts_ms": 1_700_000_000_000, "north": False, "region": [""]}


def test_the_reference_counts_its_events_per_hour_of_their_time(spec: str) -> None:
    # GIVEN three valid events of 22:13 UTC, one of 23:00 (ISO-8601) and one the decoder rejects
    sent = [*_sent(3), {"event_id": "late", "entity_id": "car-9", "ts": "2023-11-14T23:00:00Z", "lat": 1.0, "lon": 2.0},
            {"event_id": "bad", "entity_id": "x", "ts": 1, "lon": 2.0}]
    transform = Tag()
    transform.load_region([""], 1)
    # WHEN the reference run computes the expectations and the comparison carries them
    expected = expected_fields(transform, sent)
    result = compare(expected, [], transform="Tag")
    # THEN the events per hour (its start, epoch ms) are those of the valid events only
    assert result.hours == ((1_699_999_200_000, 3), (1_700_002_800_000, 1))


def test_the_report_says_what_the_transform_added_and_which_field_it_never_filled(spec: str) -> None:
    # GIVEN four events, two north of the equator; Tag adds "north" (a bool, always filled) and "region" (the
    # catch-all's [""]: filled), Count adds "n"
    sent = _sent(4)
    # WHEN the oracle runs each
    tag = run_oracle(f"{spec}:Tag", sent, [])
    count = run_oracle(f"{spec}:Count", sent, [])
    # THEN the counts per added field cover every event the reference ran over (here all missing from the fleet)
    assert tag.filled == (("north", 4), ("region", 4))
    assert tag.filled_line() == "what the transform added (reference run, 4 events): north in 4, region in 4"
    assert count.filled == (("n", 4),)


def test_a_field_the_transform_never_filled_is_named() -> None:
    # GIVEN a reference run whose transform added "zones" (always empty on this data) and "speed_mps"
    class Zones(Tag):
        def apply(self, event: Mapping[str, Any]) -> dict[str, Any]:
            return {"zones": [], "speed_mps": None if event["event_id"] == "e0" else 1.5}

    expected = expected_fields(Zones(), _sent(3))
    # WHEN compared THEN the summary names the field that was empty in every event
    result = compare(expected, [])
    assert result.filled == (("speed_mps", 2), ("zones", 0))
    assert result.filled_line().endswith("speed_mps in 2, zones in 0; zones empty in every event: the transform "
                                         "found nothing for it on this data")
