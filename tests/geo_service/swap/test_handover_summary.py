"""The swap's handover summary (geo_service.swap.handover_summary): one item the new slots read, one aggregator."""

from __future__ import annotations

from typing import Any

from geo_testkit import Resources
from hypothesis import given
from hypothesis import strategies as st

from geo_service.adapters.aws import Clients
from geo_service.leases.lease import LeaseManager
from geo_service.serving.slots import handover_reading
from geo_service.swap.handover_summary import OPEN, Aggregator, SummaryStore, decode_bits, encode_bits, summarise


@given(st.lists(st.booleans(), max_size=2000))
def test_a_bitmap_round_trips(flags: list[bool]) -> None:
    # GIVEN any flags WHEN encoded and decoded THEN they come back; 1,000 flags take 125 bytes (168 base64 chars)
    assert decode_bits(encode_bits(flags), len(flags)) == flags
    assert len(encode_bits([True] * 1000)) == 168


def test_the_summary_keeps_the_lowest_its_slot_the_second_lowest_and_the_drained() -> None:
    # GIVEN three old slots: one drained, one at 10 s, one at 12 s, and one that never published
    caught = {"w1": OPEN, "w2": 10.0, "w3": 12.0}
    # WHEN summarised with w4 missing
    s = summarise(5, 4, caught, ["w1", "w2", "w3", "w4"], at=100.0, by="me")
    # THEN the lowest is w4's 0 (it has not published: nothing passes), then w2's 10 s; w1 is drained
    assert (s.low, s.low_slot, s.next_low, s.drained) == (0.0, "w4", 10.0, frozenset({"w1"}))
    # AND once every slot is drained it is open
    assert summarise(5, 4, dict.fromkeys(["w1", "w2"], OPEN), ["w1", "w2"], 1.0, "me").open


def test_a_carrier_uses_its_own_fresher_time_for_the_lowest_slot_but_never_passes_the_second_lowest() -> None:
    # GIVEN w2 lowest at 10 s (published), next lowest 12 s
    s = summarise(5, 4, {"w2": 10.0, "w3": 12.0}, ["w2", "w3"], at=100.0, by="me")
    # WHEN the process carrying w2 knows it is caught up to 11 s, or to 20 s
    # THEN the limit uses 11 s, then stops at the second lowest 12 s; another process gets the published 10 s
    assert s.low_for("w2", 11.0) == 11.0 and s.low_for("w2", 20.0) == 12.0
    assert s.low_for("w3", 20.0) == 10.0 and s.low_for(None, 0.0) == 10.0


def _old_leases(clients: Clients, res: Resources, n: int, caught_up: float) -> list[str]:
    ids = [f"w{i:04d}" for i in range(n)]
    for w in ids:
        m = LeaseManager(clients.dynamodb, res.leases_table, 1, f"old-{w}", 60.0)
        m.claim(w)
        m.publish_caught_up(caught_up)
    return ids


def _count_calls(clients: Clients) -> dict[str, int]:
    calls: dict[str, int] = {}

    def count(model: Any, **_kw: Any) -> None:
        calls[model.name] = calls.get(model.name, 0) + 1

    clients.dynamodb.meta.events.register("before-call.dynamodb.*", count)
    return calls


def test_one_aggregation_reads_the_old_leases_once_and_every_gate_read_is_one_small_item(
        clients: Clients, resources: Resources) -> None:
    # GIVEN 250 old slots caught up to 50 s, and a swap into v2
    ids = _old_leases(clients, resources, 250, 50.0)
    store = SummaryStore(clients.dynamodb, resources.leases_table, 2, 1, ids)
    now = [1000.0]
    agg = Aggregator(store, "agg", period_s=1.0, clock=lambda: now[0], monotonic=lambda: now[0])
    calls = _count_calls(clients)
    # WHEN the aggregator steps twice within one period
    first = agg.step()
    agg.step()
    # THEN it read the 250 leases once (3 calls of up to 100 keys) and wrote one item
    assert calls == {"BatchGetItem": 3, "PutItem": 1}
    assert first is not None and first.low == 50.0 and not first.open
    # WHEN 40 new slots' gates read the summary
    calls.clear()
    readings = [handover_reading(store, lambda: (None, 0.0))() for _ in range(40)]
    # THEN each read one item, whatever the number of old slots
    assert calls == {"GetItem": 40} and {r.low for r in readings} == {50.0}


def test_a_summary_never_goes_back_in_time_and_an_open_one_ends_the_aggregation(clients: Clients,
                                                                                  resources: Resources) -> None:
    # GIVEN two old slots and a stored summary aggregated at t=100
    ids = _old_leases(clients, resources, 2, 5.0)
    store = SummaryStore(clients.dynamodb, resources.leases_table, 2, 1, ids)
    assert store.write(summarise(2, 1, {"w0000": 7.0, "w0001": 8.0}, ids, at=100.0, by="a"))
    # WHEN an older aggregation (a stale process at t=90) tries to write
    stale = summarise(2, 1, {"w0000": 1.0, "w0001": 1.0}, ids, at=90.0, by="b")
    # THEN it is refused and the stored one stays
    assert not store.write(stale)
    stored = store.read()
    assert stored is not None and (stored.low, stored.by) == (7.0, "a")
    # WHEN every old slot drained
    for w in ids:
        m = LeaseManager(clients.dynamodb, resources.leases_table, 1, f"old-{w}", 60.0)
        m.claim(w)
        m.mark_drained()
    now = [200.0]
    agg = Aggregator(store, "agg", period_s=1.0, clock=lambda: now[0], monotonic=lambda: now[0])
    # THEN the aggregation says open, is done, and reads nothing more
    assert agg.step() is not None and agg.done
    calls = _count_calls(clients)
    now[0] += 10
    agg.step()
    assert calls == {}
    stored = store.read()
    assert stored is not None and stored.open and stored.drained == frozenset(ids)
