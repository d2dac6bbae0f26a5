"""Tests for partitioner.control.crowds: the declared-crowds file and the forecast raised where a crowd will be."""

from __future__ import annotations

import json

import pytest
from spec_factory import make_counts, qk

from geokernel.errors import PolicyError
from geokernel.geo.tiles import Tile, bounds
from partitioner.control.crowds import DeclaredCrowd, parse_crowds, reserve, venue_codes
from partitioner.load.counts import Counts

S = 300.0
T0 = 1_800_000_000.0


def centre(x: int, y: int, z: int) -> tuple[float, float]:
    """(lat, lon) of the centre of tile (x, y, z)."""
    b = bounds(Tile(x, y, z))
    return (b.south + b.north) / 2, (b.west + b.east) / 2


def rows(c: Counts) -> dict[str, float]:
    return dict(zip(c.quadkeys, c.weights.tolist(), strict=True))


def crowd(x: int, y: int, z: int, load_per_s: float, start: float = T0, end: float = T0 + 3600.0,
          name: str = "match") -> DeclaredCrowd:
    lat, lon = centre(x, y, z)
    return DeclaredCrowd(name, lat, lon, start, end, load_per_s)


def test_a_file_of_crowds_parses_with_iso_and_epoch_times():
    # GIVEN a list with an ISO time (with a zone) and epoch seconds, one entry without a name
    text = json.dumps([{"name": "cup final", "lat": 51.556, "lon": -0.2796, "start": "2026-05-16T14:00:00Z",
                        "end": "2026-05-16T18:00:00+00:00", "load_per_s": 7.5},
                       {"lat": 53.4, "lon": -2.98, "start": 1_800_000_000, "end": 1_800_003_600, "load_per_s": 2}])
    # WHEN parsed
    a, b = parse_crowds(text, "crowds.json")
    # THEN the times are epoch seconds and the unnamed entry is named by its index
    assert (a.name, a.start, a.end, a.load_per_s) == ("cup final", 1_778_940_000.0, 1_778_954_400.0, 7.5)
    assert (b.name, b.start, b.end) == ("crowd 1", 1_800_000_000.0, 1_800_003_600.0)
    assert parse_crowds(b"[]", "crowds.json") == ()


OK = {"lat": 51.5, "lon": -0.1, "start": 100, "end": 200, "load_per_s": 1.0}


@pytest.mark.parametrize(("content", "needle"), [
    ("{not json", "crowds.json: declared crowds are not JSON"),
    ('{"lat": 1}', "crowds.json: declared crowds must be a JSON list of objects, got dict"),
    (json.dumps([OK, 5]), "crowds.json: crowd 1 must be an object, got 5"),
    (json.dumps([{**OK, "load": 3}]), "crowds.json: crowd 0: unknown key 'load'"),
    (json.dumps([{k: v for k, v in OK.items() if k != "end"}]), "crowds.json: crowd 0: missing 'end'"),
    (json.dumps([{**OK, "lat": 95}]), "crowds.json: crowd 0: crowd 'crowd 0': lat must be in [-90, 90]"),
    (json.dumps([{**OK, "end": 50}]), "crowds.json: crowd 0: crowd 'crowd 0': start must be before end, got 100.0"),
    (json.dumps([{**OK, "load_per_s": 0}]), "load_per_s must be > 0, got 0"),
    (json.dumps([{**OK, "load_per_s": "7"}]), "load_per_s must be a finite number, got '7'"),
    (json.dumps([{**OK, "start": "2026-05-16T14:00:00"}]),
     "crowds.json: crowd 0 start must be an ISO 8601 time with a zone or epoch seconds, got '2026-05-16T14:00:00'"),
    (json.dumps([{**OK, "name": 3}]), "crowds.json: crowd 0: name must be a string, got 3"),
])
def test_a_bad_file_is_one_error_naming_the_file_the_entry_and_the_value(content, needle):
    with pytest.raises(PolicyError) as exc:
        parse_crowds(content, "crowds.json")
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_only_crowds_overlapping_the_interval_are_reserved_for():
    # GIVEN a forecast and a crowd from T0 to T0 + 1 h
    fc = make_counts({qk(10, 10, 12): 100.0, qk(11, 10, 12): 50.0})
    c = crowd(11, 10, 12, 2.0)
    # WHEN the interval ends before it, or starts after it, or overlaps it
    before, none1 = reserve(fc, [c], T0 - 600, T0, S)
    after, none2 = reserve(fc, [c], T0 + 3600, T0 + 3900, S)
    during, used = reserve(fc, [c], T0 - 100, T0 + 200, S)
    # THEN only the overlapping interval raises the venue's cell to 2 events/s x 300 s, the rest untouched
    assert before is fc and after is fc and none1 == none2 == ()
    assert used == (c,)
    assert rows(during) == pytest.approx({qk(10, 10, 12): 100.0, qk(11, 10, 12): 600.0})


def test_a_crowd_the_forecast_already_holds_is_not_counted_twice():
    # GIVEN a venue cell already forecast above the declared crowd (the crowd has shown in the windows)
    fc = make_counts({qk(10, 10, 12): 100.0, qk(11, 10, 12): 900.0})
    # WHEN reserved for
    out, _ = reserve(fc, [crowd(11, 10, 12, 2.0)], T0, T0 + 300, S)
    # THEN the larger forecast stays
    assert rows(out) == pytest.approx({qk(10, 10, 12): 100.0, qk(11, 10, 12): 900.0})


def test_a_venue_without_load_gets_a_row_and_two_crowds_on_one_cell_add_up():
    # GIVEN a forecast without the venue's cell, and two crowds there at once
    fc = make_counts({qk(10, 10, 12): 100.0})
    crowds = [crowd(30, 7, 12, 1.0, name="a"), crowd(30, 7, 12, 0.5, name="b")]
    # WHEN reserved for
    out, used = reserve(fc, crowds, T0, T0 + 300, S)
    # THEN the venue's cell is a new grid row holding both
    assert [c.name for c in used] == ["a", "b"]
    assert rows(out) == pytest.approx({qk(10, 10, 12): 100.0, qk(30, 7, 12): 450.0})


def test_refinement_rows_inside_the_venue_scale_with_it():
    # GIVEN a rolled-up forecast: grid cell (11, 10, 12) of 100 refined into two zoom-14 rows of 60 and 40
    fc = make_counts({qk(10, 10, 12): 100.0, qk(11, 10, 12): 100.0, qk(44, 40, 14): 60.0, qk(45, 40, 14): 40.0})
    # WHEN a crowd of 1,000 a window is declared on a point inside the grid cell
    out, _ = reserve(fc, [crowd(44, 41, 14, 1000.0 / S)], T0, T0 + 300, S)
    # THEN the grid cell and its refinement are scaled by one factor (the refinement keeps its proportions)
    assert rows(out) == pytest.approx({qk(10, 10, 12): 100.0, qk(11, 10, 12): 1000.0, qk(44, 40, 14): 600.0,
                                           qk(45, 40, 14): 400.0})
    assert out.total == pytest.approx(1100.0)


def test_venue_codes_are_the_tiles_of_the_crowds_there_in_the_interval():
    # GIVEN two crowds in one zoom-8 tile during the first hour, one in another tile later
    early = [crowd(40, 20, 10, 1.0), crowd(41, 21, 10, 1.0, name="other")]
    late = crowd(200, 100, 10, 1.0, start=T0 + 7200.0, end=T0 + 9000.0)
    # WHEN their venues are asked for at zoom 8 for the first hour, and for the whole day
    first = venue_codes([*early, late], 8, T0, T0 + 3600.0)
    day = venue_codes([*early, late], 8, T0, T0 + 86_400.0)
    # THEN the first hour has the one tile both early crowds share, the day both tiles, sorted and unique
    assert first.tolist() == [(10 << 8) | 5]
    assert day.tolist() == sorted([(10 << 8) | 5, (50 << 8) | 25])
    assert venue_codes([late], 8, T0, T0 + 3600.0).tolist() == []
