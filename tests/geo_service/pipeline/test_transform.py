"""The pluggable transform and the offline reverse geocoder (region + buffer loading, nearest place)."""

from __future__ import annotations

import gzip
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from geo_service.pipeline.places import PLACES_HEADER, PLACES_PATH, load_places, region_prefixes
from geo_service.pipeline.transform import (
    GeoTransform,
    ReverseGeocoder,
    TransformError,
    haversine_km,
    load_transform,
)
from geokernel.geo.tiles import Tile, bounds, quadkey, quadkey_to_tile, tile

KNOWN = [  # (lat, lon, expected place, country): points a few hundred metres from the centre
    (40.7128, -74.0060, "New York City", "US"),
    (51.5074, -0.1278, "London", "GB"),
    (-33.8688, 151.2093, "Sydney", "AU"),
    (-22.9068, -43.1729, "Rio de Janeiro", "BR"),
    (55.7558, 37.6173, "Moscow", "RU"),
    (-1.2864, 36.8172, "Nairobi", "KE"),
]


@pytest.fixture(scope="module")
def world() -> ReverseGeocoder:
    g = ReverseGeocoder()
    g.load_region([""], buffer_ring=1)
    return g


@pytest.mark.parametrize(("lat", "lon", "name", "country"), KNOWN)
def test_known_cities_resolve_to_themselves(world: ReverseGeocoder, lat: float, lon: float, name: str,
                                            country: str) -> None:
    # GIVEN the whole-world geocoder (catch-all region)
    # WHEN a point near a famous city centre is geocoded
    got = world.apply({"lat": lat, "lon": lon})
    # THEN the nearest place is that city, within a couple of km, with its first-level division and time zone
    assert (got["place"], got["country"]) == (name, country)
    assert got["admin1"].startswith(country + ".") and "/" in got["timezone"]
    assert 0 <= got["distance_km"] < 3.0 and got["place_population"] > 1_000_000


def test_distance_is_the_great_circle_distance_to_the_returned_place(world: ReverseGeocoder) -> None:
    # GIVEN a point in the middle of nowhere (Sahara)
    lat, lon = 23.0, 12.0
    # WHEN geocoded
    got = world.apply({"lat": lat, "lon": lon})
    # THEN distance_km matches haversine to that place, and no loaded place is nearer
    assert world.places is not None
    i = world.places.name.index(got["place"])
    assert got["distance_km"] == pytest.approx(haversine_km(lat, lon, world.places.lat[i], world.places.lon[i]),
                                               abs=0.01)
    nearest = min(haversine_km(lat, lon, a, b) for a, b in zip(world.places.lat, world.places.lon, strict=True))
    assert got["distance_km"] == pytest.approx(nearest, abs=0.01)


def test_a_point_in_london_is_in_england_on_london_time(world: ReverseGeocoder) -> None:
    # GIVEN the whole-world geocoder and a London region's geocoder
    region = ReverseGeocoder()
    region.load_region([quadkey(tile(-0.1278, 51.5074, 9))], buffer_ring=1)
    point = {"lat": 51.5074, "lon": -0.1278}
    # WHEN a point in central London is geocoded, one event at a time and as a batch
    # THEN both give GeoNames' key of England and London's IANA time zone
    for g in (world, region):
        got = g.apply(point)
        assert (got["place"], got["admin1"], got["timezone"]) == ("London", "GB.ENG", "Europe/London")
        assert g.apply_batch([point]) == [got]


#: Points near a border, with the nearest place's values (not the point's own, which GeoNames gives in brackets):
#: Wernstein am Inn (AT.04, Europe/Vienna) across the Inn from Neuburg, Bavaria; Boggabilla (AU.02, Australia/Sydney,
#: daylight saving) 8 km from Goondiwindi, Queensland (no daylight saving: another clock from October to April).
BORDER = [
    (48.50802, 13.461, "Neuburg", "DE", "DE.02", "Europe/Berlin"),
    (-28.60477, 150.35934, "Goondiwindi", "AU", "AU.04", "Australia/Brisbane"),
]


@pytest.mark.parametrize(("lat", "lon", "place", "country", "admin1", "timezone"), BORDER)
def test_near_a_border_admin1_and_timezone_are_the_nearest_places(world: ReverseGeocoder, lat: float, lon: float,
                                                                 place: str, country: str, admin1: str,
                                                                 timezone: str) -> None:
    # GIVEN a point near a border or a time-zone line, and a geocoder of its region only
    region = ReverseGeocoder()
    region.load_region([quadkey(tile(lon, lat, 10))], buffer_ring=1)
    point = {"lat": lat, "lon": lon}
    # WHEN it is geocoded
    got = world.apply(point)
    # THEN admin1 and timezone are those of the nearest place across the line, as its country is
    assert (got["place"], got["country"], got["admin1"], got["timezone"]) == (place, country, admin1, timezone)
    assert world.places is not None
    i = min(range(world.loaded), key=lambda k: haversine_km(lat, lon, world.places.lat[k], world.places.lon[k]))
    assert (world.places.admin1[i], world.places.timezone[i]) == (admin1, timezone)
    # AND a region's geocoder and the batch form give the same
    assert region.apply(point) == got and region.apply_batch([point]) == world.apply_batch([point]) == [got]


def test_the_batch_form_gives_each_events_admin1_and_timezone(world: ReverseGeocoder) -> None:
    # GIVEN events around the world (and one far out at sea), the known cities and the border points among them
    points = [{"lat": la, "lon": lo} for la, lo, *_ in KNOWN + BORDER] + [{"lat": -45.0, "lon": -130.0}]
    # WHEN they are answered as one batch and one at a time
    batch = world.apply_batch(points)
    # THEN each event has the same admin1 and timezone (and every other field) either way
    assert [(r["admin1"], r["timezone"]) for r in batch] == [(world.apply(p)["admin1"], world.apply(p)["timezone"])
                                                             for p in points]
    assert batch == [world.apply(p) for p in points]


def test_an_empty_admin1_or_timezone_is_none(tmp_path: Path) -> None:
    # GIVEN a places file whose only place has no admin1 code and no time zone (GeoNames has 93 places of 1,000
    # people or more without an admin1 code, 29 of them in Singapore)
    path = tmp_path / "places.csv.gz"
    path.write_bytes(gzip.compress(f"{PLACES_HEADER}\n{quadkey(tile(103.85, 1.29, 24))},1.29,103.85,X,SG,5000,,\n"
                                   .encode()))
    g = ReverseGeocoder(path)
    g.load_region([""], 0)
    # WHEN a point is geocoded
    got = g.apply({"lat": 1.3, "lon": 103.8})
    # THEN both fields are None, not "", the same in the batch form
    assert (got["place"], got["admin1"], got["timezone"]) == ("X", None, None)
    assert g.apply_batch([{"lat": 1.3, "lon": 103.8}]) == [got]


def test_region_loads_only_places_in_its_tiles_plus_the_buffer_ring(world: ReverseGeocoder) -> None:
    # GIVEN a zoom-8 tile over Paris
    region = quadkey(tile(2.3522, 48.8566, 8))
    g = ReverseGeocoder()
    # WHEN it is loaded with a one-tile buffer ring
    g.load_region([region], buffer_ring=1)
    # THEN it holds every place of the 3x3 block of zoom-8 tiles and nothing else, far fewer than the world
    t = quadkey_to_tile(region)
    block = {quadkey(Tile(t.x + dx, t.y + dy, 8)) for dx in (-1, 0, 1) for dy in (-1, 0, 1)}
    assert world.places is not None and g.places is not None
    expected = sorted(n for n, q in zip(world.places.name, world.places.quadkey, strict=True) if q[:8] in block)
    assert sorted(g.places.name) == expected
    assert 0 < g.loaded < world.loaded / 50
    w, e = bounds(Tile(t.x - 1, t.y, 8)).west, bounds(Tile(t.x + 1, t.y, 8)).east
    s, n = bounds(Tile(t.x, t.y + 1, 8)).south, bounds(Tile(t.x, t.y - 1, 8)).north
    assert all(s <= la <= n and w <= lo <= e for la, lo in zip(g.places.lat, g.places.lon, strict=True))
    assert g.apply({"lat": 48.8566, "lon": 2.3522})["country"] == "FR"


def test_buffer_ring_wraps_across_the_antimeridian() -> None:
    # GIVEN a zoom-3 tile on the western edge of the map (x = 0), over the Pacific/Alaska side
    region = quadkey(Tile(0, 2, 3))
    # WHEN its prefixes with a one-tile ring are computed
    prefixes = region_prefixes([region], 1)
    # THEN the ring includes the last column (x = 7), and a zoom-0 catch-all is the whole world
    assert quadkey(Tile(7, 2, 3)) in prefixes and len(prefixes) == 9
    assert region_prefixes(["0", ""], 1) == ("",)


def test_region_prefixes_drop_cells_covered_by_coarser_ones() -> None:
    # GIVEN a region listing a cell and one of its descendants (a finer cell is redundant)
    # WHEN prefixes are computed without a buffer
    prefixes = region_prefixes(["0231", "023101", "1"], 0)
    # THEN only the coarsest covering cells remain
    assert prefixes == ("0231", "1")


def test_a_region_without_places_answers_from_all_places(world: ReverseGeocoder, tmp_path: Path) -> None:
    # GIVEN a region of open ocean with no places (a zoom-10 tile in the South Pacific), no buffer
    g = ReverseGeocoder()
    g.load_region([quadkey(tile(-130.0, -45.0, 10))], buffer_ring=0)
    # WHEN a point there is geocoded
    got = g.apply({"lat": -45.0, "lon": -130.0})
    # THEN it loaded nothing and answers as one holding every place (it answered None before issue #56's review)
    assert g.loaded == 0 and got == world.apply({"lat": -45.0, "lon": -130.0}) and got["place"] is not None
    # AND only a places file without places gives no place
    empty = tmp_path / "empty.csv.gz"
    with gzip.open(empty, "wt", encoding="utf-8") as f:
        f.write(PLACES_HEADER + "\n")
    for region in ([""], ["0"]):
        none = ReverseGeocoder(empty)
        none.load_region(region, 1)
        assert none.apply({"lat": 10.0, "lon": -100.0}) == dict.fromkeys(
            ("place", "country", "place_population", "distance_km", "admin1", "timezone"))
        assert none.apply_batch([{"lat": 10.0, "lon": -100.0}]) == [none.apply({"lat": 10.0, "lon": -100.0})]


def test_bad_region_and_bad_data_are_named() -> None:
    # GIVEN a bad quadkey, a negative ring, and apply before load
    g = ReverseGeocoder()
    # WHEN / THEN each error names the bad value
    with pytest.raises(ValueError, match="'0249'"):
        g.load_region(["0249"], 1)
    with pytest.raises(TransformError, match="-1"):
        region_prefixes(["0"], -1)
    with pytest.raises(TransformError, match="before load_region"):
        g.apply({"lat": 0.0, "lon": 0.0})


def test_places_file_with_bad_header_or_row_is_rejected_naming_the_line(tmp_path: Path) -> None:
    # GIVEN places files with a wrong header, and with a bad latitude on line 3
    wrong = tmp_path / "wrong.csv.gz"
    wrong.write_bytes(gzip.compress(b"name,lat\nX,1\n"))
    bad = tmp_path / "bad.csv.gz"
    bad.write_bytes(gzip.compress(PLACES_HEADER.encode() + b"\n"
                                  b"0,1.0,2.0,A,AA,10,AA.01,Etc/UTC\n0,north,2.0,B,BB,10,BB.01,Etc/UTC\n"))
    # WHEN / THEN loading fails naming the file, the header or the line
    with pytest.raises(TransformError, match="header must be"):
        load_places([""], wrong)
    with pytest.raises(TransformError, match="line 3: bad place row '0,north"):
        load_places([""], bad)
    with pytest.raises(TransformError, match="cannot read places file"):
        load_places([""], tmp_path / "missing.csv.gz")


def test_shipped_places_file_is_sorted_and_complete() -> None:
    # GIVEN the data file shipped in the package
    with gzip.open(PLACES_PATH, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    # WHEN its rows are inspected
    keys = [line.split(",", 1)[0] for line in lines[1:]]
    # THEN it has the header, >100k places, each keyed by its zoom-24 quadkey, sorted
    assert lines[0] == "quadkey,lat,lon,name,country,population,admin1,timezone"
    assert len(keys) > 100_000 and all(len(k) == 24 for k in keys[:1000]) and keys == sorted(keys)


class UpperCaseTransform:
    """A minimal custom transform used to test GEO_TRANSFORM loading."""

    def __init__(self) -> None:
        self.region: tuple[str, ...] = ()

    def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None:
        self.region = tuple(quadkeys)

    def apply(self, event: Mapping[str, Any]) -> dict[str, Any]:
        return {"entity_upper": str(event["entity_id"]).upper()}


class NotATransform:
    pass


def test_transform_is_selected_by_module_and_class_name() -> None:
    # GIVEN the default and a custom transform named as module:Class
    # WHEN they are loaded
    default = load_transform("geo_service.pipeline.transform:ReverseGeocoder")
    custom = load_transform(f"{__name__}:UpperCaseTransform")
    custom.load_region(["0"], 1)
    # THEN both satisfy the protocol and the custom one runs
    assert isinstance(default, GeoTransform) and isinstance(custom, GeoTransform)
    assert custom.apply({"entity_id": "car-1"}) == {"entity_upper": "CAR-1"}


@pytest.mark.parametrize(("spec", "message"), [
    ("no_colon", "must be 'module:Class'"),
    ("geo_service.nope:X", "cannot import module 'geo_service.nope'"),
    ("geo_service.pipeline.transform:Missing", "has no class 'Missing'"),
    (f"{__name__}:NotATransform", "lacks load_region"),
])
def test_bad_transform_names_are_rejected(spec: str, message: str) -> None:
    # GIVEN a bad GEO_TRANSFORM value
    # WHEN / THEN loading it fails with a message naming it
    with pytest.raises(TransformError, match=message):
        load_transform(spec)


@pytest.mark.parametrize(("before", "after"), [
    (["1202200"], ["1202200", "1202201"]),   # gains a neighbour
    (["1202200", "1202201"], ["1202201"]),   # loses one
    (["1202200"], ["0313131"]),              # moves far away
    (["12022"], ["1202200"]),                # shrinks inside its old square
])
def test_a_carried_region_parses_only_what_it_gains_and_answers_like_a_fresh_load(before: list[str],
                                                                               after: list[str]) -> None:
    # GIVEN a geocoder loaded for one region
    old = ReverseGeocoder()
    old.load_region(before, buffer_ring=1)
    # WHEN it builds the geocoder of the slot's next region, and a fresh one loads that region from scratch
    carried = old.for_region(after, buffer_ring=1)
    fresh = ReverseGeocoder()
    fresh.load_region(after, buffer_ring=1)
    # THEN both hold the same places and answer alike; the carried one parsed only the places the old did not cover
    assert sorted(carried.places.quadkey) == sorted(fresh.places.quadkey)  # type: ignore[union-attr]
    held = set(old.places.quadkey)  # type: ignore[union-attr]
    assert carried.gained == sum(1 for q in fresh.places.quadkey if q not in held)  # type: ignore[union-attr]
    assert carried.gained < fresh.loaded or not held & set(fresh.places.quadkey)  # type: ignore[union-attr]
    b = bounds(quadkey_to_tile(after[0]))
    point = {"lat": (b.south + b.north) / 2, "lon": (b.west + b.east) / 2}
    assert carried.apply(point) == fresh.apply(point)
    # AND the old geocoder is unchanged (it keeps serving while the new one is built)
    assert old.prefixes == region_prefixes(before, 1)


def test_places_sharing_coordinates_resolve_the_same_in_every_region() -> None:
    # GIVEN two places of the data at the very same point (Zhuyuan, 6,328 people, and Zhuzilin, 16,800)
    from geo_service.pipeline.places import Places, distinct_points

    point = {"lat": 22.53811, "lon": 114.01504}
    world, region = ReverseGeocoder(), ReverseGeocoder()
    world.load_region([""], 1)
    region.load_region([quadkey(tile(point["lon"], point["lat"], 9))], 1)
    # WHEN the point is geocoded by the whole world and by one region's worker
    # THEN both name the more populous one (a KD-tree would break the tie by its build order)
    assert world.apply(point)["place"] == region.apply(point)["place"] == "Zhuzilin"
    # AND distinct_points keeps one place per coordinate pair, the most populous, in the original order otherwise
    arr = np.array
    p = Places(lat=arr([1.0, 2.0, 1.0]), lon=arr([5.0, 6.0, 5.0]), name=("a", "b", "c"), country=("X",) * 3,
               population=arr([10, 5, 20]), quadkey=("0", "1", "0"), admin1=("X.1", "X.2", "X.3"),
               timezone=("Etc/A", "Etc/B", "Etc/C"))
    kept = distinct_points(p)
    assert kept.name == ("b", "c") and kept.admin1 == ("X.2", "X.3") and kept.timezone == ("Etc/B", "Etc/C")
