"""Tests for geokernel.geo.quadtree: zoom groups, and the Morton code interval of a square."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from spec_factory import qk

from geokernel.geo.quadtree import by_zoom, morton, square_spans


def test_zoom_groups_come_shallowest_first_and_cover_every_tile() -> None:
    z = np.array([5, 3, 5, 0, 3])
    groups = list(by_zoom(z))
    assert [g[0] for g in groups] == [0, 3, 5]
    assert sum(int(g[1].sum()) for g in groups) == len(z)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_squares_span_holds_exactly_the_morton_codes_of_its_cells(data: st.DataObject) -> None:
    # GIVEN a square at zoom z and a finer zoom up to four levels below it
    z = data.draw(st.integers(0, 12))
    x, y = data.draw(st.integers(0, (1 << z) - 1)), data.draw(st.integers(0, (1 << z) - 1))
    zoom = z + data.draw(st.integers(0, 4))
    # WHEN its span of Morton codes at that zoom is taken
    start, end = square_spans(np.array([x]), np.array([y]), z, zoom)
    # THEN the span is exactly the codes of the square's cells at that zoom, and its start is the cells' quadkey prefix
    d = zoom - z
    cx, cy = np.meshgrid(np.arange(x << d, (x + 1) << d), np.arange(y << d, (y + 1) << d))
    codes = np.sort(morton(cx.ravel(), cy.ravel()))
    assert codes.tolist() == list(range(int(start[0]), int(end[0])))
    assert int(start[0]) == int(qk(x, y, z) or "0", 4) << (2 * d)
