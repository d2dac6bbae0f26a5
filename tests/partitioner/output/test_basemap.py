"""Tests for partitioner.output.basemap: the bundled coastlines and borders load offline, cut at the antimeridian."""

from __future__ import annotations

import numpy as np

from partitioner.output.basemap import BASEMAP_FILE, basemap_lines
from partitioner.output.plot import merc_y

WORLD = (-180.0, 180.0, -180.0, 180.0)


def test_the_bundled_file_is_small_and_holds_coasts_and_borders():
    assert BASEMAP_FILE.stat().st_size < 400_000
    lines = basemap_lines(WORLD)
    assert len(lines.coast) > 1000 and len(lines.borders) > 300


def test_great_britain_has_coastline_and_no_line_jumps_across_the_antimeridian():
    # GIVEN a view of Great Britain (lon -8..2, lat 50..59 in map units)
    box = (-8.0, 2.0, float(merc_y(50.0)), float(merc_y(59.0)))
    coast = basemap_lines(box).coast
    assert coast and all(np.isfinite(c).all() for c in coast)
    # THEN no polyline anywhere has a step wider than 180 degrees of longitude
    assert all(np.abs(np.diff(c[:, 0])).max(initial=0.0) <= 180.0 for c in basemap_lines(WORLD).coast)


def test_a_view_east_of_the_antimeridian_gets_the_lines_shifted_by_360():
    # GIVEN a view of Fiji drawn east of +180 (lon 178..182 as 178..-178)
    box = (176.0, 184.0, float(merc_y(-20.0)), float(merc_y(-15.0)))
    plain = basemap_lines(box).coast
    both = basemap_lines(box, (0.0, 360.0)).coast
    # THEN the shifted copy adds Fiji's islands west of -180 + 360
    assert len(both) > len(plain)
    assert max(float(c[:, 0].max()) for c in both) > 180.0
