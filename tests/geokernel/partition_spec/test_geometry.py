"""Tests for geokernel.partition_spec.geometry: owned squares, region cells and shapes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spec_factory import make_spec, qk

from geokernel.partition_spec import geometry
from geokernel.partition_spec.geometry import geometry_zoom, owned_squares, region_cells, square_shapes
from geokernel.partition_spec.index import SpecIndex

Z = 10


def _hole_spec():
    # p0001 lists a zoom-9 cell; p0002 lists one of its four zoom-10 children
    return make_spec([("p0001", "w0001", [qk(250, 200, Z - 1)], 3.0), ("p0002", "w0002", [qk(500, 400, Z)], 5.0)],
                     10.0)


def test_a_finer_listing_carves_a_hole_in_the_coarse_square() -> None:
    # WHEN the squares each partition owns are listed
    squares = owned_squares(_hole_spec())
    # THEN the coarse cell is replaced by its three other children; the catch-all owns no square
    assert sorted(squares["p0001"]) == sorted([qk(501, 400, Z), qk(500, 401, Z), qk(501, 401, Z)])
    assert squares["p0002"] == [qk(500, 400, Z)]
    assert squares["p9999"] == []


def test_region_cells_expand_coarse_squares_minus_holes_and_coarsen_deeper_ones() -> None:
    # GIVEN the coarse cell with a hole, and a partition listing one zoom-12 cell
    spec = make_spec([("p0001", "w0001", [qk(250, 200, Z - 1)], 3.0), ("p0002", "w0002", [qk(500, 400, Z)], 5.0),
                      ("p0003", "w0003", [qk(4 * 700 + 1, 4 * 700 + 2, Z + 2)], 1.0)], 10.0)
    # WHEN the cells of all three regions at zoom 10 are listed
    lab, x, y = region_cells(spec, SpecIndex(spec), [0, 1, 2], Z)
    cells = sorted(zip(lab.tolist(), x.tolist(), y.tolist(), strict=True))
    # THEN p0001 has the three cells outside the hole, p0002 its cell, p0003 the ancestor of its deep cell
    assert cells == [(0, 500, 401), (0, 501, 400), (0, 501, 401), (1, 500, 400), (2, 700, 700)]


def test_shapes_of_an_l_a_bar_across_the_antimeridian_and_two_apart_pieces() -> None:
    # GIVEN an L of three cells (a coarse cell with a hole), a 2x1 bar across the antimeridian, two far cells
    n = 1 << Z
    spec = make_spec([("p0001", "w0001", [qk(250, 200, Z - 1)], 3.0), ("p0002", "w0002", [qk(500, 400, Z)], 5.0),
                      ("p0003", "w0003", [qk(n - 1, 300, Z), qk(0, 300, Z)], 2.0),
                      ("p0004", "w0004", [qk(10, 10, Z), qk(13, 10, Z)], 2.0)], 10.0)
    # WHEN measured
    cells, comps, compact = square_shapes(spec, [0, 2, 3], Z)
    # THEN areas, components and P^2 / (4 pi A) follow; partitions left out get 0, 0, NaN
    assert cells.tolist() == [3.0, 0.0, 2.0, 2.0, 0.0]
    assert comps.tolist() == [1, 0, 1, 2, 0]
    assert compact[0] == pytest.approx(64 / (12 * math.pi))  # L of 3: P = 8
    assert compact[2] == pytest.approx(36 / (8 * math.pi))  # bar of 2: P = 6
    assert math.isnan(compact[1]) and math.isnan(compact[4])


def test_geometry_is_measured_coarser_when_the_rings_exceed_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN regions listing zoom-10 cells
    spec = make_spec([("p0001", "w0001", [qk(1, 1, Z), qk(2, 1, Z)], 2.0)], 10.0)
    # THEN with the default budget the grid zoom is kept
    assert geometry_zoom(spec, Z, [0]) == Z
    # AND from zoom 14, with a budget of exactly the two cells' rings at zoom 10 (2 x 8), it steps up to zoom 10
    monkeypatch.setattr(geometry, "GEOMETRY_BUDGET", 16)
    assert geometry_zoom(spec, 14, [0]) == Z
    # AND below that no zoom fits (a square's ring never shrinks below 8 cells): it stops at zoom 1
    monkeypatch.setattr(geometry, "GEOMETRY_BUDGET", 15)
    assert geometry_zoom(spec, 14, [0]) == 1


# ---------------------------------------------------------------------------
# shapes on squares against a brute force over cells
# ---------------------------------------------------------------------------


def _brute_shapes(spec, regions, zoom):
    """Area, 8-connected components and P^2/(4 pi A) per region, from its cells at ``zoom``."""
    from geokernel.geo.graph import components

    lab, x, y = region_cells(spec, SpecIndex(spec), regions, zoom)
    n = 1 << zoom
    out = {}
    for r in regions:
        sel = lab == r
        cells = set(zip(x[sel].tolist(), y[sel].tolist(), strict=True))
        if not cells:
            out[r] = (0, 0, None)
            continue
        edges = sum(1 for cx, cy in cells for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1))
                    if ((cx + dx) % n, cy + dy) not in cells)
        k, _ = components(x[sel], y[sel], zoom)
        out[r] = (len(cells), k, edges * edges / (4 * math.pi * len(cells)))
    return out


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_square_shapes_match_a_brute_force_over_cells(data) -> None:
    # GIVEN regions listing squares of zooms 3..5 in a corner of the zoom-5 grid (poles and the antimeridian
    #       within reach), finer squares carving holes in coarser ones of other regions
    zoom = 5
    n = 1 << zoom
    squares = data.draw(st.lists(st.tuples(st.integers(3, zoom), st.integers(-4, 3), st.integers(0, 5),
                                           st.integers(0, 3)), min_size=1, max_size=14))
    rows: dict[str, int] = {}
    for z, x, y, region in squares:
        side = 1 << (zoom - z)
        q = qk((x * side) % n // side, min(y, (1 << z) - 1), z)
        rows.setdefault(q, region)
    parts = [(f"p{r + 1:04d}", "w0001", [q for q, rr in rows.items() if rr == r], 1.0)
             for r in sorted(set(rows.values()))]
    spec = make_spec(parts, 100.0)
    regions = list(range(len(parts)))
    # WHEN measured on squares and by brute force over cells
    cells, comps, compact = square_shapes(spec, regions, zoom)
    brute = _brute_shapes(spec, regions, zoom)
    # THEN they agree
    for r in regions:
        area, k, c = brute[r]
        assert cells[r] == area and comps[r] == k
        assert (c is None and math.isnan(compact[r])) or compact[r] == pytest.approx(c)


@given(st.integers(0, (1 << 20) - 1), st.integers(0, (1 << 20) - 1))
def test_morton_code_is_the_quadkey_read_in_base_4(x: int, y: int) -> None:
    import mercantile
    code = int(geometry.morton(np.array([x]), np.array([y]))[0])
    assert code == int(mercantile.quadkey(mercantile.Tile(x, y, 20)), 4)
