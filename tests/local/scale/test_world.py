"""local.scale.world: the events the simulated router sends (stateless draws and entities that keep a home cell)."""

from __future__ import annotations

import json

import mercantile
import numpy as np

from local.scale.world import EventSource, HomedSource
from partitioner.load.counts import Counts
from partitioner.simulate.places import counts_from_codes

ZOOM = 12


def _counts(weights: list[float]) -> Counts:
    """Counts of ``len(weights)`` tiles in a row at zoom 12 near London, with these weights."""
    x0, y0 = 2046, 1361
    codes = np.array([((x0 + i) << ZOOM) | y0 for i in range(len(weights))], dtype=np.int64)
    return counts_from_codes(codes, np.array(weights, dtype=np.float64), ZOOM, "test")


def _tile_of(data: bytes) -> tuple[int, int]:
    ev = json.loads(data)
    t = mercantile.tile(ev["lon"], ev["lat"], ZOOM)
    return t.x, t.y


def test_a_homed_entity_stays_in_its_cell_and_keeps_it_under_the_next_version() -> None:
    # GIVEN 400 entities homed over four cells
    src = HomedSource(_counts([1.0, 2.0, 3.0, 4.0]), 400, seed=3)
    # WHEN events are drawn, then drawn again under a version that scales the load
    first = src.take(2000)
    nxt = src.follow(_counts([4.0, 3.0, 2.0, 1.0]), seed=4)
    second = nxt.take(2000)
    # THEN every event of an entity lies in that entity's one cell, in both versions
    cells: dict[str, set[tuple[int, int]]] = {}
    for batch in (first, second):
        for e, d in zip(batch.entity_ids, batch.data, strict=True):
            cells.setdefault(e, set()).add(_tile_of(d))
    assert cells and all(len(c) == 1 for c in cells.values())
    # AND the homes are the same entities' homes, and event ids go on across versions (an id names one event)
    assert np.array_equal(nxt.homes, src.homes)
    assert set(first.event_ids).isdisjoint(second.event_ids)


def test_a_homed_source_follows_each_versions_load_per_cell() -> None:
    # GIVEN one cell with 9 times the weight of the other
    src = HomedSource(_counts([1.0, 9.0]), 1000, seed=5)
    # WHEN many events are drawn
    ev = src.take(20000)
    # THEN about 90 % of them fall in the heavy cell, whatever the number of entities homed there
    heavy = sum(_tile_of(d) == (2047, 1361) for d in ev.data) / len(ev.data)
    assert 0.87 < heavy < 0.93
    # AND under a version with the weights swapped the same entities give the other cell about 90 %
    ev2 = src.follow(_counts([9.0, 1.0]), seed=6).take(20000)
    light = sum(_tile_of(d) == (2047, 1361) for d in ev2.data) / len(ev2.data)
    assert 0.07 < light < 0.13


def test_a_part_draws_only_its_ingest_shards_entities() -> None:
    # GIVEN 300 entities over three cells, split over 4 ingest shards by entity number
    src = HomedSource(_counts([1.0, 1.0, 1.0]), 300, seed=7)
    # WHEN shard 2's invocation draws its events
    ev = src.take(500, part=(2, 4))
    # THEN every event is of an entity e with e % 4 == 2, and not encoding keeps the points only
    assert {int(e.removeprefix("car-")) % 4 for e in ev.entity_ids} == {2}
    assert src.take(10, encode=False, part=(1, 4)).data == []


def test_a_stateless_source_numbers_its_events_on_from_the_version_before() -> None:
    # GIVEN a source that already handed out 50 events
    one = EventSource(_counts([1.0, 2.0]), 10, seed=1)
    one.take(50)
    # WHEN the next version's source starts from it
    two = EventSource(_counts([2.0, 1.0]), 10, seed=2, first_id=one.next_id)
    # THEN its ids go on: no id names two events (the run's lost-event check compares ids)
    assert two.take(3).event_ids == ["s50", "s51", "s52"]
