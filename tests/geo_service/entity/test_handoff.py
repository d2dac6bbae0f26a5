"""The state handoff gate (geo_service.entity.handoff.EntityGate): apply, skip, hold, hand over, give up."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from geo_service.entity.handoff import EntityGate, Handoff, HandoffStore, Wanted
from geo_service.entity.store import EntityStates
from geokernel.contracts.handoff import Marker, Stamp

HERE, THERE = "v1#w-a", "v1#w-b"


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def gate(label: str = HERE, clock: Clock | None = None) -> tuple[EntityGate, list[tuple[str, int]]]:
    store = EntityStates("t:T")
    store.labels.add(label)
    return EntityGate(store, clock=clock or Clock(), wait_s=30.0), []


def offer(g: EntityGate, ran: list[tuple[str, int]], e: str, n: int, prev: str | None, shard: str = "s0") -> None:
    def run() -> None:
        ran.append((e, n))
        g.store.put(e, {"last": n})
    g.offer(e, Stamp(n, prev), shard, run)


def test_in_order_events_apply_and_copies_are_skipped() -> None:
    g, ran = gate()
    offer(g, ran, "e", 1, None)
    offer(g, ran, "e", 2, HERE)
    offer(g, ran, "e", 2, HERE)  # a retried put
    assert ran == [("e", 1), ("e", 2)] and g.duplicates == 1 and g.holding == 0


def test_a_reordered_event_waits_for_its_predecessor_in_the_same_slot() -> None:
    g, ran = gate()
    offer(g, ran, "e", 1, None)
    offer(g, ran, "e", 3, HERE)
    assert ran == [("e", 1)] and g.holds("s0") and g.fetches() == []
    offer(g, ran, "e", 2, HERE)
    assert ran == [("e", 1), ("e", 2), ("e", 3)] and not g.holds("s0")


def test_an_entity_from_another_slot_waits_for_its_state_and_then_runs_in_order() -> None:
    # GIVEN an entity whose events 5 and 6 arrive here, its event 4 having gone to another slot
    clock = Clock()
    g, ran = gate(clock=clock)
    offer(g, ran, "e", 5, THERE)
    offer(g, ran, "e", 6, HERE)
    offer(g, ran, "f", 1, None)  # other entities go on
    assert ran == [("f", 1)] and [(e, w.n, w.prev) for e, w in g.fetches()] == [("e", 4, THERE)]
    # WHEN the state after event 4 arrives 1.5 s later
    clock.t += 1.5
    g.receive({"e": (4, '{"last":4}')})
    # THEN both events run in order on that state, and the wait is measured
    assert ran == [("f", 1), ("e", 5), ("e", 6)] and g.holding == 0 and g.waits == [1.5]


def test_a_marker_hands_the_state_over_once_its_event_was_applied() -> None:
    g, ran = gate()
    g.mark(Marker("e", 2, THERE), "s0")  # the marker overtook event 2 (a reordered put)
    offer(g, ran, "e", 1, None)
    assert g.outbox == [] and g.holds("s0")
    offer(g, ran, "e", 2, HERE)
    assert g.outbox == [Handoff("e", 2, '{"last":2}')] and "e" not in g.store and g.store.gone == {"e": 2}
    assert not g.holds("s0")
    g.mark(Marker("e", 2, THERE), "s0")  # a copy of the marker
    assert len(g.outbox) == 1


def test_a_handed_over_state_carries_when_the_router_put_its_marker() -> None:
    # GIVEN a slot that applied event 1 of "e" and then reads the marker for it, put by the router at t=100
    g, ran = gate()
    offer(g, ran, "e", 1, None)
    g.mark(Marker("e", 1, THERE), "s0", put_at=100.0)
    # AND a marker for "f" read before its event 1, put at t=105
    g.mark(Marker("f", 1, THERE), "s0", put_at=105.0)
    offer(g, ran, "f", 1, None)
    # THEN each state handed over carries its marker's put time (answered at once, or once its event ran)
    assert [(h.entity_id, h.asked_at) for h in g.outbox] == [("e", 100.0), ("f", 105.0)]


def test_a_marker_to_the_slot_carried_over_from_this_one_keeps_the_shared_store() -> None:
    g, ran = gate()
    g.store.labels.add("v2#w-a")
    offer(g, ran, "e", 1, None)
    g.mark(Marker("e", 1, "v2#w-a"), "s0")
    assert g.outbox == [] and "e" in g.store


def test_a_slot_carried_after_its_old_slot_handed_the_state_on_fetches_it() -> None:
    # GIVEN a successor that took the old slot over alone: it applied event 1 of "e" and answered the marker to the
    # new version's slot, which it did not carry yet, by handing the state over
    g, ran = gate()
    offer(g, ran, "e", 1, None)
    g.mark(Marker("e", 1, "v2#w-a"), "s0")
    assert g.outbox == [Handoff("e", 1, '{"last":1}')] and g.store.gone == {"e": 1}
    # WHEN it then carries that slot (one store, a gate of its own) and reads the entity's next events there
    g.store.labels.add("v2#w-a")
    twin = EntityGate(g.store, label="v2#w-a", clock=Clock(), wait_s=30.0)
    offer(twin, ran, "e", 2, HERE)
    offer(twin, ran, "e", 3, "v2#w-a")
    # THEN it fetches the handed-over state instead of waiting for its own store, and runs both events on it
    assert [(e, w.n, w.local) for e, w in twin.fetches()] == [("e", 1, False)]
    twin.receive({"e": (1, '{"last":1}')})
    assert ran == [("e", 1), ("e", 2), ("e", 3)] and twin.holding == 0 and twin.lost == 0


def test_an_entity_held_too_long_runs_without_its_state_and_is_counted() -> None:
    clock = Clock()
    g, ran = gate(clock=clock)
    offer(g, ran, "e", 3, THERE)
    clock.t += 31
    assert g.expire() == ["e"] and ran == [("e", 3)] and g.lost == 1 and g.holding == 0


def test_a_snapshot_restores_numbers_states_and_handed_entities() -> None:
    g, ran = gate()
    offer(g, ran, "e", 1, None)
    offer(g, ran, "f", 1, None)
    g.mark(Marker("f", 1, THERE), "s0")
    other = EntityStates("t:T")
    other.restore(g.store.snapshot(), "x")
    assert other.n == {"e": 1} and other.gone == {"f": 1} and other.get("e") == {"last": 1}


# ---------------------------------------------------------------------------------------------- against moto
def test_handoff_items_round_trip_and_a_drained_slot_answers_from_its_final_states(clients: Any,
                                                                                  resources: Any) -> None:
    # GIVEN the AWS side of the handoff on a moto control table and output bucket
    store = HandoffStore(clients.dynamodb, resources.control_table, clients.s3, resources.output_bucket)
    # WHEN an old slot hands over 30 entities (two BatchWriteItem calls), one with no state
    store.put([Handoff(f"e{i}", 4, None if i == 0 else f'{{"i":{i}}}') for i in range(30)])
    wants = [(f"e{i}", Wanted(4, "v1#w-a", 0.0, False)) for i in range(30)]
    # THEN the next slot reads each back in one BatchGetItem; an item for another event number is not there
    got = store.get(wants)
    assert store.get([("e1", Wanted(5, "v1#w-x", 0.0, False))]) == {}
    assert got == {"e0": (4, None), **{f"e{i}": (4, f'{{"i":{i}}}') for i in range(1, 30)}}
    assert store.calls["BatchWriteItem"] == 2 and store.calls["BatchGetItem"] == 2
    # AND an entity that was never handed over is answered by its slot's final states once that slot drained
    lone = [("z", Wanted(7, "v1#w-b", 0.0, False))]
    assert store.get(lone) == {}
    final = EntityStates("t:T")
    final.adopt("z", 7, '{"k":1}')
    store.save(1, "w-b", final.snapshot(), final=True)
    store._final_checked.clear()  # its negative answer is cached for a second
    assert store.get(lone) == {"z": (7, '{"k":1}')}
    # AND a successor finds the states of the last flush
    store.save(1, "w-b", final.snapshot(), final=False)
    assert store.latest(1, "w-b") == final.snapshot() and store.latest(1, "w-c") is None


# ---------------------------------------------------------------------------------------------- any route, any reads
@settings(max_examples=300, deadline=None)
@given(route=st.lists(st.sampled_from(["A", "B", "C", "D"]), min_size=2, max_size=30),
       seed=st.integers(0, 2**32 - 1), join=st.integers(0, 60))
def test_any_route_read_in_any_interleaving_applies_every_event_once_in_order(route: list[str], seed: int,
                                                                              join: int) -> None:
    # GIVEN an entity routed through slots in any order, as the router stamps and marks it (with re-read copies);
    # slot D is carried over from A (one store, a gate of its own) by a process that starts reading it only at step
    # ``join`` (a successor that took A over alone, and D later)
    rng = random.Random(seed)
    gates = {}
    for label in "ABC":
        store = EntityStates("t:T")
        store.labels.add(label)
        gates[label] = EntityGate(store, label=label, clock=Clock())
    shards: dict[str, list[Stamp | Marker]] = {label: [] for label in "ABCD"}
    prev: str | None = None
    for n, label in enumerate(route, start=1):
        if prev is not None and prev != label:
            shards[prev].append(Marker("e", n - 1, label))
        shards[label] += [Stamp(n, prev)] * (2 if rng.random() < 0.1 else 1)
        prev = label
    # WHEN each slot reads its shard in batches of random sizes, in a random order of slots, and the handoff
    # items pass through a shared table
    applied: list[int] = []
    items: dict[tuple[str, int], str | None] = {}
    pos = dict.fromkeys("ABCD", 0)
    steps, read_all_at = 0, None
    while read_all_at is None or steps < read_all_at + 40 * len(route):  # then 40 more steps per event to settle
        steps += 1
        if steps >= join and "D" not in gates:
            gates["A"].store.labels.add("D")
            gates["D"] = EntityGate(gates["A"].store, label="D", clock=Clock())
        if read_all_at is None and "D" in gates and all(pos[lb] >= len(shards[lb]) for lb in "ABCD"):
            read_all_at = steps
        label = rng.choice(sorted(gates))
        g = gates[label]
        k = rng.randint(0, 3)
        for rec in shards[label][pos[label]:pos[label] + k]:
            if isinstance(rec, Marker):
                g.mark(rec, "s0")
            else:
                g.offer("e", rec, "s0", lambda n=rec.n: applied.append(n))
        pos[label] += k
        for twin in gates.values():
            if twin.store is g.store:
                twin.recheck()
        items.update({(h.entity_id, h.n): h.text for h in g.outbox})
        g.outbox = []
        g.receive({e: (w.n, items[(e, w.n)]) for e, w in g.fetches() if (e, w.n) in items})
    # THEN each event ran exactly once, in order, and no slot holds anything
    assert applied == list(range(1, len(route) + 1))
    assert all(g.holding == 0 for g in gates.values())
