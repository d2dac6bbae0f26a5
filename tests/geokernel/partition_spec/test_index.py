"""Tests for geokernel.partition_spec.index: longest-prefix lookup of points, tiles and quadkeys in a spec."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spec_factory import make_spec, qk

from geokernel.errors import SpecError
from geokernel.geo.tiles import bounds, quadkey_to_tile, quadkeys_to_arrays
from geokernel.partition_spec.index import LOOKUP_ZOOM, SpecIndex
from geokernel.partition_spec.model import HASH_BUCKETS, Partition, Spec, Worker, entity_bucket

HALF = HASH_BUCKETS // 2


def _spec() -> Spec:
    # p0001 lists the zoom-4 cell "0231"; p0002 lists its child "02310" (a hole); "1320" is split by hash
    return make_spec([("p0001", "w0001", ["0231"], 3.0), ("p0002", "w0002", ["02310"], 2.0),
                      ("p0003", "w0001", ["1320"], 5.0, (0, HALF)), ("p0004", "w0002", ["1320"], 5.0, (HALF, HASH_BUCKETS))],
                     20.0)


def _centre(q: str) -> tuple[float, float]:
    b = bounds(quadkey_to_tile(q))
    return (b.west + b.east) / 2, (b.south + b.north) / 2


def test_the_longest_listed_prefix_owns_a_point_and_the_catch_all_owns_the_rest() -> None:
    index = SpecIndex(_spec())
    # GIVEN points in the finer cell, in the coarse cell outside it, and far away
    lon, lat = zip(_centre("02310"), _centre("02313"), _centre("3000"), strict=True)
    # THEN the finer listing wins inside itself, the coarse one elsewhere in its cell, the catch-all outside
    owners = index.locate(np.array(lon), np.array(lat))
    assert [index.partitions[i].id for i in owners] == ["p0002", "p0001", "p9999"]
    assert index.catch_all_index == 4


def test_a_split_cell_sends_each_entity_to_the_share_of_its_bucket() -> None:
    index = SpecIndex(_spec())
    lon, lat = _centre("1320")
    # GIVEN entities whose buckets fall in the lower and the upper half
    low = next(f"e{k}" for k in range(1000) if entity_bucket(f"e{k}") < HALF)
    high = next(f"e{k}" for k in range(1000) if entity_bucket(f"e{k}") >= HALF)
    # THEN each goes to the share holding its bucket; without an entity id the bucket is 0
    assert index.locate_one(lon, lat, low).id == "p0003"
    assert index.locate_one(lon, lat, high).id == "p0004"
    assert index.partitions[int(index.locate(np.array([lon]), np.array([lat]))[0])].id == "p0003"
    # AND the group lookup names the split cell instead, its members in hash order
    x, y = np.array([quadkey_to_tile("1320").x]), np.array([quadkey_to_tile("1320").y])
    group = index.locate_groups_xy(x, y, 4)
    assert group[0] < 0 and index.group_members(int(-group[0] - 1)).tolist() == [2, 3]


def test_a_coarse_tile_goes_to_the_owner_of_its_own_prefix() -> None:
    # GIVEN the coarse cell looked up at its own zoom (the finer hole inside it is not consulted)
    index = SpecIndex(_spec())
    t = quadkey_to_tile("0231")
    assert index.partitions[int(index.locate_xy([t.x], [t.y], 4)[0])].id == "p0001"
    # AND its parent, coarser than every listing, belongs to the catch-all
    p = quadkey_to_tile("023")
    assert int(index.locate_xy([p.x], [p.y], 3)[0]) == index.catch_all_index


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text("0123", min_size=1, max_size=8), min_size=1, max_size=40))
def test_tiles_of_mixed_zooms_resolve_as_each_at_its_own_zoom(qks: list[str]) -> None:
    index = SpecIndex(_spec())
    x, y, z = quadkeys_to_arrays(qks)
    expected = [int(index.locate_xy(x[k:k + 1], y[k:k + 1], int(z[k]))[0]) for k in range(len(qks))]
    assert index.locate_tiles(x, y, z).tolist() == expected


def test_attributed_load_shares_a_split_cell_by_hash_range_and_keeps_the_total() -> None:
    index = SpecIndex(_spec())
    # GIVEN load in the hole, in the coarse cell, at a deeper zoom in the split cell, and outside everything
    loads = index.attribute(["02310", "0231", "132012", "3"], [2.0, 3.0, 10.0, 1.0])
    # THEN each partition receives its part; the split cell's load is halved by the hash ranges
    assert loads.tolist() == [3.0, 2.0, 5.0, 5.0, 1.0]
    assert index.attribute([], []).tolist() == [0.0] * 5


def test_a_spec_without_a_catch_all_or_with_a_too_deep_quadkey_is_rejected() -> None:
    w = (Worker("w0001", 1.0, "1"),)
    no_catch_all = Spec(version=1, max_load=10.0, partitions=(Partition("p0001", "w0001", ("0",), 1.0),), workers=w)
    with pytest.raises(SpecError, match="no catch-all"):
        SpecIndex(no_catch_all)
    deep = "0" * (LOOKUP_ZOOM + 1)
    too_deep = make_spec([("p0001", "w0001", [deep], 1.0)], 10.0, validate=False)
    with pytest.raises(SpecError, match=f"quadkey {deep!r} is deeper than zoom {LOOKUP_ZOOM}"):
        SpecIndex(too_deep)


def test_locate_agrees_with_the_tile_of_the_point() -> None:
    # GIVEN a spec listing one zoom-10 cell, and a point on its corner-most inside edge
    spec = make_spec([("p0001", "w0001", [qk(300, 400, 10)], 1.0)], 10.0)
    b = bounds(quadkey_to_tile(qk(300, 400, 10)))
    owners = SpecIndex(spec).locate(np.array([b.west, b.east]), np.array([b.north - 1e-9, b.north - 1e-9]))
    # THEN its west edge belongs to it and its east edge to the next cell (the catch-all here)
    assert owners.tolist() == [0, 1]


@settings(max_examples=150, deadline=None)
@given(listed=st.lists(st.text("0123", min_size=1, max_size=5), min_size=1, max_size=12, unique=True),
       queries=st.lists(st.text("0123", min_size=1, max_size=7), min_size=1, max_size=30))
def test_lookup_is_the_longest_listed_prefix_nested_or_not(listed: list[str], queries: list[str]) -> None:
    # GIVEN partitions listing any squares (some inside others, some not), one partition each
    spec = make_spec([(f"p{k + 1:04d}", "w0001", [q], 1.0) for k, q in enumerate(listed)], 100.0)
    index = SpecIndex(spec)
    # WHEN tiles of any zoom are located (at their own zoom)
    x, y, z = quadkeys_to_arrays(queries)
    got = index.locate_tiles(x, y, z).tolist()
    # THEN each goes to the partition listing its longest prefix, else the catch-all
    def owner(q: str) -> int:
        best = max((p for p in listed if q.startswith(p)), key=len, default=None)
        return listed.index(best) if best is not None else index.catch_all_index
    assert got == [owner(q) for q in queries]
