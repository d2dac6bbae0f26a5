"""Tests for partitioner.output.plot: PNGs of the expected pixel size, with and without counts."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from spec_factory import make_counts, make_spec, qk

from partitioner.output.plot import _lon_cut, _title, merc_y, plot_mismatch, plot_spec

Z = 12
A = [qk(x, y, Z) for x in range(2040, 2046) for y in range(1360, 1366)]
B = [qk(x, y, Z) for x in range(2046, 2050) for y in range(1360, 1366)]
SPEC = make_spec([("p0001", "w0001", A, 72.0), ("p0002", "w0002", B, 48.0)], 80.0)
COUNTS = make_counts({**dict.fromkeys(A, 2.0), **dict.fromkeys(B, 2.0)})


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_plot_spec_writes_a_png_of_size_times_dpi(tmp_path):
    out = plot_spec(SPEC, tmp_path / "map.png", size=(8.0, 4.0), dpi=50)
    assert png_size(out) == (400, 200)
    assert out.stat().st_size > 5_000


def test_plot_spec_with_counts_underlay(tmp_path):
    out = plot_spec(SPEC, tmp_path / "map.png", COUNTS, title="test")
    assert png_size(out) == (1400, 700)


def test_plot_spec_world_scale_and_catch_all_only(tmp_path):
    # GIVEN cells far apart (sub-pixel at world scale) and a spec with only the catch-all
    far = make_spec([("p0001", "w0001", [qk(1, 1, Z)], 1.0), ("p0002", "w0002", [qk(4000, 3000, Z)], 1.0)], 5.0)
    assert png_size(plot_spec(far, tmp_path / "far.png", size=(6.0, 3.0), dpi=40)) == (240, 120)
    bare = make_spec([], 5.0, catch_all_worker="w0001")
    assert png_size(plot_spec(bare, tmp_path / "bare.png", size=(6.0, 3.0), dpi=40)) == (240, 120)


def test_plot_mismatch_bars(tmp_path):
    new = make_counts({**dict.fromkeys(A, 5.0), **dict.fromkeys(B, 1.0)})
    out = plot_mismatch(SPEC, new, tmp_path / "mismatch.png", size=(6.0, 3.0), dpi=50)
    assert png_size(out) == (300, 150)


def test_merc_y_is_zero_at_the_equator_and_symmetric():
    y = merc_y([0.0, 45.0, -45.0, 90.0])
    assert abs(y[0]) < 1e-12 and abs(y[1] + y[2]) < 1e-12 and 179.9 < y[3] <= 180.0 + 1e-9


def test_a_region_across_the_antimeridian_is_drawn_in_one_piece(tmp_path):
    # GIVEN squares on both sides of +/-180 (the last and the first columns at zoom 7)
    n = 1 << 7
    west = np.array([(n - 2) / n * 360 - 180, (n - 1) / n * 360 - 180, -180.0, 1 / n * 360 - 180])
    east = west + 360 / n
    # WHEN the view is chosen THEN it starts east of the widest empty band, so the squares are contiguous
    cut = _lon_cut(west, east)
    assert cut == pytest.approx(west[0])
    shifted = np.where(west < cut, west + 360.0, west)
    assert shifted.max() - shifted.min() == pytest.approx(3 * 360 / n)
    # AND data far from the meridian keeps the usual -180..180 view
    assert _lon_cut(np.array([-10.0, 20.0]), np.array([-9.0, 21.0])) == -180.0
    spec = make_spec([("p0001", "w0001", [qk(x % n, 60, 7) for x in range(n - 2, n + 2)], 1.0)], 5.0)
    assert png_size(plot_spec(spec, tmp_path / "anti.png", size=(6.0, 3.0), dpi=40)) == (240, 120)


def test_the_title_says_which_spec_is_drawn_under_which_load():
    assert "spec v1 (test) under the load it was built for" in _title(SPEC, None, None)
    under = _title(SPEC, make_counts(dict.fromkeys(A, 1.0)), "old spec v1 under the load that triggered v2")
    assert under.startswith("old spec v1 under the load that triggered v2\n")
    assert "spec v1 (test) under load from" in under and "cap 80 per worker" in under


def test_the_title_names_a_snapshot_by_its_window_not_its_manifest_file():
    counts = make_counts(dict.fromkeys(A, 1.0), "snapshots/window_end=2026-01-01T00-05-00Z/_manifest.json")
    assert "under load from window_end=2026-01-01T00-05-00Z;" in _title(SPEC, counts, None)


def test_data_spread_over_the_world_keeps_the_usual_view():
    # GIVEN cells all around the world with the widest gap (20 degrees) in the Pacific, not at +/-180
    west = np.concatenate([np.arange(-179.0, -160.0, 1.0), np.arange(-140.0, 179.0, 1.0)])
    # THEN re-centring would save only 20 of 360 degrees: the view stays -180..180
    assert _lon_cut(west, west + 1.0) == -180.0
