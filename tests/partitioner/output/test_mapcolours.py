"""Tests for partitioner.output.mapcolours: worker borders and neighbour-distinct, sticky colours."""

from __future__ import annotations

from spec_factory import block, make_spec

from geokernel.partition_spec.index import SpecIndex
from partitioner.output.mapcolours import colour_slots, worker_borders

Z = 10


def _grid_spec(cols: int, rows: int):
    """cols x rows workers, each a 3x3 block, tiled edge to edge."""
    parts = [(f"p{k + 1:04d}", f"w{k + 1:04d}", block(100 + 3 * c, 103 + 3 * c, 100 + 3 * r, 103 + 3 * r, Z), 1.0)
             for k, (c, r) in enumerate((c, r) for r in range(rows) for c in range(cols))]
    return make_spec(parts, 5.0)


def test_borders_follow_worker_changes_and_pairs_are_edge_neighbours():
    # GIVEN a 2x1 tiling of two workers
    spec = _grid_spec(2, 1)
    b = worker_borders(spec, SpecIndex(spec), Z)
    # THEN they are neighbours, and the border is the outline (6+6+3+3 edges) plus the shared edge seen from both sides
    assert b.pairs == frozenset({("w0001", "w0002")})
    assert len(b.segments) == 6 + 6 + 3 + 3 + 3 + 3


def test_no_two_neighbours_share_a_colour_on_a_tiling_of_many_workers():
    # GIVEN 30 workers (more than the 12 slots) tiled 6 x 5, each touching up to 4 others
    spec = _grid_spec(6, 5)
    b = worker_borders(spec, SpecIndex(spec), Z)
    slots = colour_slots([w.id for w in spec.workers], b.pairs, 12)
    # THEN every edge-neighbour pair differs and colours are spread (no slot used by more than 3 of the 30)
    assert len(b.pairs) == 5 * 5 + 6 * 4
    assert all(slots[a] != slots[c] for a, c in b.pairs)
    assert max(list(slots.values()).count(s) for s in range(12)) <= 3


def test_few_workers_all_differ_and_colours_do_not_depend_on_order():
    ids = [f"w{k:04d}" for k in range(1, 13)]
    slots = colour_slots(ids, frozenset(), 12)
    assert len(set(slots.values())) == 12
    assert colour_slots(list(reversed(ids)), frozenset(), 12) == slots


def test_workers_meeting_across_the_antimeridian_are_neighbours():
    n = 1 << Z
    spec = make_spec([("p0001", "w0001", block(n - 2, n, 10, 12, Z), 1.0),
                      ("p0002", "w0002", block(0, 2, 10, 12, Z), 1.0)], 5.0)
    assert worker_borders(spec, SpecIndex(spec), Z).pairs == frozenset({("w0001", "w0002")})


def test_a_worker_keeps_its_colour_when_a_later_worker_joins():
    # GIVEN the colours of 8 workers, then the same 8 plus a new one (the next spec version adds a slot)
    ids = [f"w{k:04d}" for k in range(1, 9)]
    before = colour_slots(ids, frozenset(), 12)
    after = colour_slots([*ids, "w0009"], frozenset(), 12)
    # THEN the 8 keep their colours and the new one gets a colour none of them has
    assert {w: after[w] for w in ids} == before
    assert after["w0009"] not in before.values()
