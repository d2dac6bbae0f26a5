"""Tests for glue_jobs.transform: native quadkeys vs mercantile, validation, windows, rollup, cost."""

from __future__ import annotations

import json
import math
import random
import warnings
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

import mercantile
import numpy as np
import pytest
from pyspark.sql import functions as F

from glue_jobs import transform as T
from partitioner import tiles
from partitioner.contracts.events import REASON_CODES
from partitioner.tiles import EPSILON, MAX_LAT, arrays_to_quadkeys, tiles_xy

pytestmark = pytest.mark.spark

N_RANDOM = 1_000_000


def _mercantile_qk(lon: float, lat: float, zoom: int) -> str:
    """mercantile's quadkey; where mercantile returns a tile outside the grid (x or y == 2**zoom, for a
    coordinate within EPSILON of the east/south edge) the capped partitioner.tiles answer instead."""
    t = _mercantile_tile(lon, lat, zoom)
    if t.x >= 1 << zoom or t.y >= 1 << zoom:
        return tiles.quadkey(tiles.tile(lon, lat, zoom))
    return str(mercantile.quadkey(t))


def _mercantile_tile(lon: float, lat: float, zoom: int) -> mercantile.Tile:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # mercantile warns about its own out-of-grid tiles
        return mercantile.tile(lon, lat, zoom)


# ---------------------------------------------------------------------------
# Quadkeys
# ---------------------------------------------------------------------------


def test_reference_partitioner_tiles_equals_mercantile_on_a_sample() -> None:
    # GIVEN 20k random points (inside the mercator square, away from lon=180-EPSILON) at zooms 1..23
    rng = np.random.default_rng(7)
    lon = rng.uniform(-180, 180, 20_000)
    lat = rng.uniform(-MAX_LAT, MAX_LAT, 20_000)
    for zoom in (1, 5, 12, 18, 23):
        # WHEN both compute tiles
        x, y = tiles_xy(lon, lat, zoom)
        ref = [mercantile.tile(a, b, zoom) for a, b in zip(lon.tolist(), lat.tolist(), strict=True)]
        # THEN they agree everywhere, so partitioner.tiles can stand in for mercantile on 1M points
        assert x.tolist() == [t.x for t in ref]
        assert y.tolist() == [t.y for t in ref]
        assert arrays_to_quadkeys(x[:500], y[:500], zoom) == [mercantile.quadkey(t) for t in ref[:500]]


def test_native_quadkey_matches_reference_on_a_million_random_points(spark) -> None:
    # GIVEN 1M random points generated in Spark (lon in [-180, 180], lat beyond the mercator limit too)
    df = spark.range(N_RANDOM).select(
        (F.rand(11) * 360.0 - 180.0).alias("lon"),
        (F.rand(12) * 180.0 - 90.0).alias("lat"),
    )
    # WHEN the native expression computes quadkeys at zoom 23 and at zoom 7
    out = df.select("lon", "lat", T.quadkey_expr(F.col("lon"), F.col("lat"), 23).alias("qk23"),
                    T.quadkey_expr(F.col("lon"), F.col("lat"), 7).alias("qk7")).toPandas()
    lon, lat = out["lon"].to_numpy(), out["lat"].to_numpy()
    # THEN every one equals the (mercantile-equivalent) vectorised reference
    for zoom, col in ((23, "qk23"), (7, "qk7")):
        x, y = tiles_xy(lon, lat, zoom)
        expected = arrays_to_quadkeys(x, y, zoom)
        got = out[col].tolist()
        assert len(got) == N_RANDOM
        mismatches = [] if got == expected else [i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b]
        assert not mismatches, f"zoom {zoom}: {len(mismatches)} mismatches, first {lon[mismatches[0]]!r}, " \
                               f"{lat[mismatches[0]]!r}: {got[mismatches[0]]!r} != {expected[mismatches[0]]!r}"


def _edge_points() -> list[tuple[float, float]]:
    pts = [(0.0, 0.0), (-180.0, 0.0), (180.0, 0.0), (180.0, MAX_LAT), (-180.0, -MAX_LAT), (179.999999, 85.0),
           (-179.999999, -85.0), (0.0, MAX_LAT), (0.0, -MAX_LAT), (0.0, 85.0511), (0.0, -85.0511),
           (13.4, 52.5), (-0.0, -0.0), (1e-15, -1e-15), (-1e-15, 1e-15), (90.0, 0.0), (-90.0, 0.0)]
    for zoom in (1, 2, 3, 8, 12, 17, 23):
        n = 1 << zoom
        for k in (1, n // 3, n // 2, n - 1):
            b = mercantile.bounds(mercantile.Tile(k, k, zoom))
            # exactly on tile edges, and a hair either side of them
            for dx in (0.0, 1e-12, -1e-12):
                pts.append((b.west + dx, b.north - dx))
                pts.append((b.east - dx, b.south + dx))
    return pts


def test_native_quadkey_matches_mercantile_on_edges_at_every_zoom(spark) -> None:
    # GIVEN tile-edge points (mercantile's EPSILON nudge matters), the antimeridian and the poles
    pts = _edge_points()
    df = spark.createDataFrame(pts, "lon double, lat double")
    # WHEN quadkeys are computed natively at every zoom 1..23
    cols = [T.quadkey_expr(F.col("lon"), F.col("lat"), z).alias(f"z{z}") for z in range(1, 24)]
    rows = df.select("lon", "lat", *cols).collect()
    # THEN each equals mercantile.quadkey(mercantile.tile(...)) exactly (out-of-grid quirk aside, see below)
    assert any(_mercantile_tile(lon, lat, 1).x >= 2 for lon, lat in pts)  # the quirk is exercised
    for r in rows:
        for z in range(1, 24):
            assert r[f"z{z}"] == _mercantile_qk(r["lon"], r["lat"], z), (r["lon"], r["lat"], z)


def test_poles_clamp_to_edge_rows_and_lon_180_is_the_last_column(spark) -> None:
    # GIVEN points at and beyond the mercator limit (mercantile raises at exactly +/-90) and lon=180
    df = spark.createDataFrame([(0.0, 90.0), (0.0, -90.0), (180.0, 89.0), (-180.0, -89.9)], "lon double, lat double")
    # WHEN quadkeys are computed at zoom 4
    got = [r[0] for r in df.select(T.quadkey_expr(F.col("lon"), F.col("lat"), 4)).collect()]
    # THEN the poles land in the first/last row, lon 180 in the last column (as partitioner.tiles says)
    assert got == [tiles.quadkey(tiles.tile(lon, lat, 4)) for lon, lat in ((0, 90), (0, -90), (180, 89), (-180, -89.9))]
    assert got[0] == "1000" and got[1] == "3222" and got[2] == "1111" and got[3] == "2222"


def test_lon_within_epsilon_below_180_stays_in_the_last_column(spark) -> None:
    # GIVEN a longitude whose unit x is within EPSILON below 1 (mercantile would return column 2**z,
    # which its quadkey() silently wraps to column 0: a known mercantile quirk partitioner.tiles caps)
    lon = 180.0 - 1e-12
    assert (lon / 360 + 0.5 + EPSILON) * 2 ** 10 >= 2 ** 10
    df = spark.createDataFrame([(lon, 10.0)], "lon double, lat double")
    # WHEN its quadkey is computed natively
    got = df.select(T.quadkey_expr(F.col("lon"), F.col("lat"), 10)).first()[0]
    # THEN it is the last column, like partitioner.tiles
    assert got == tiles.quadkey(tiles.tile(lon, 10.0, 10))
    assert tiles.quadkey_to_tile(got).x == 2 ** 10 - 1


def test_quadkey_expr_rejects_a_bad_zoom() -> None:
    # GIVEN / WHEN / THEN a zoom outside [0, 30] is refused with its value in the message
    with pytest.raises(ValueError, match="31"):
        T.quadkey_expr(F.lit(0.0), F.lit(0.0), 31)
    with pytest.raises(ValueError, match="'3'"):
        T.quadkey_expr(F.lit(0.0), F.lit(0.0), "3")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Validation and quarantine
# ---------------------------------------------------------------------------

GOOD = {"event_id": "e1", "entity_id": "u1", "ts": 1700000000000, "lat": 52.5, "lon": 13.4, "extra": {"k": 1}}


def _with(**changes: object) -> str:
    doc = dict(GOOD)
    for k, v in changes.items():
        if v is _DROP:
            doc.pop(k)
        else:
            doc[k] = v
    return json.dumps(doc)


_DROP = object()

CASES = [
    ("not json {", "unparsable_json", "not json {"),
    ("", "unparsable_json", "empty"),
    ("[1, 2]", "not_an_object", "array"),
    ("42", "not_an_object", "42"),
    (_with(entity_id=_DROP), "missing_field", "entity_id"),
    (_with(ts=None), "missing_field", "ts"),
    (_with(event_id=""), "missing_field", "event_id"),
    (_with(lat="52.5"), "bad_type", "'52.5'"),
    (_with(lon=True), "bad_type", "lon"),
    (_with(event_id={"a": 1}), "bad_type", "event_id"),
    ('{"event_id": "e", "entity_id": "u", "ts": 1, "lat": NaN, "lon": 1}', "nan", "lat"),
    (_with(lat=85.06), "lat_out_of_range", "85.06"),
    (_with(lat=-90), "lat_out_of_range", "-90"),
    (_with(lon=180.5), "lon_out_of_range", "180.5"),
    (_with(ts="yesterday"), "bad_timestamp", "'yesterday'"),
    (_with(ts=-1), "bad_timestamp", "'-1'"),
    (_with(ts="2024-13-45T00:00:00Z"), "bad_timestamp", "2024-13-45"),
]


def test_every_bad_record_is_quarantined_with_its_reason_and_raw_text(spark) -> None:
    # GIVEN one bad record per reason code plus a null record, each with its source
    raws = [c[0] for c in CASES] + [None]
    df = spark.createDataFrame([(r, f"f.jsonl:{i + 1}") for i, r in enumerate(raws)], "value string, source string")
    # WHEN they are classified
    classified = T.classify_events(df)
    bad = {r["source"]: r for r in T.quarantine_records(classified).collect()}
    # THEN none is valid, each has the expected code, a detail naming the bad value, the raw text and source
    assert T.valid_events(classified).count() == 0
    assert len(bad) == len(raws)
    for i, (raw, code, detail) in enumerate(CASES):
        rec = bad[f"f.jsonl:{i + 1}"]
        assert rec["code"] == code, (raw, rec["reason"])
        assert rec["reason"].startswith(code + ": ")
        assert detail in rec["reason"], (raw, rec["reason"])
        assert rec["raw"] == raw
        assert rec["quarantined_at"].endswith("Z")
    assert bad[f"f.jsonl:{len(raws)}"]["code"] == "unparsable_json"
    assert {c[1] for c in CASES} == set(REASON_CODES)


def test_valid_events_are_typed_and_timestamps_parse_in_every_accepted_form(spark) -> None:
    # GIVEN valid events with ts as epoch ms number, digit string, ISO Z, ISO offset, fractional seconds,
    # a numeric id (accepted as its text) and a latitude between MAX_LAT and the contract's limit
    raws = [_with(ts=1700000000123), _with(ts="1700000000123"), _with(ts="2023-11-14T22:13:20.123Z"),
            _with(ts="2023-11-14T23:13:20.123+01:00"), _with(event_id=7), _with(lat=85.05112878, lon=-180)]
    df = spark.createDataFrame([(r, f"s{i}") for i, r in enumerate(raws)], "value string, source string")
    # WHEN classified
    rows = {r["source"]: r for r in T.valid_events(T.classify_events(df)).collect()}
    # THEN all are valid and every ts form gives the same instant
    assert len(rows) == len(raws)
    want = datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    for i in range(4):
        assert rows[f"s{i}"]["ts"].replace(tzinfo=UTC) == want or rows[f"s{i}"]["ts"].astimezone(UTC) == want
    assert rows["s4"]["event_id"] == "7"
    assert rows["s5"]["lat"] == 85.05112878 and rows["s5"]["lon"] == -180.0


# ---------------------------------------------------------------------------
# Windows
# ---------------------------------------------------------------------------


def _events_df(spark, pts):
    return spark.createDataFrame(
        [(f"e{i}", "u", datetime.fromtimestamp(t, UTC), lat, lon) for i, (t, lon, lat) in enumerate(pts)],
        "event_id string, entity_id string, ts timestamp, lat double, lon double")


def test_tumbling_windows_split_at_window_boundaries(spark) -> None:
    # GIVEN events at t = 0, 59.999, 60 and 125 s in the same cell
    base = 1_700_000_040  # a multiple of 60
    df = T.with_quadkey(_events_df(spark, [(base, 1.0, 1.0), (base + 59.999, 1.0, 1.0), (base + 60, 1.0, 1.0),
                                           (base + 125, 1.0, 1.0)]), 10)
    # WHEN aggregated in 60 s tumbling windows
    rows = T.aggregate_windows(df, T.WindowSpec("60 seconds")).orderBy("window_start").collect()
    # THEN counts are 2, 1, 1 in three consecutive-ish windows
    assert [(int(r["window_start"].replace(tzinfo=UTC).timestamp()) - base, r["events"]) for r in rows] == [
        (0, 2), (60, 1), (120, 1)]


def test_aggregate_cells_equals_quadkey_then_aggregate(spark) -> None:
    # GIVEN 2000 random events over 5 minutes
    base = 1_700_000_040
    rnd = random.Random(5)
    df = _events_df(spark, [(base + rnd.random() * 300, rnd.uniform(-180, 180), rnd.uniform(-85, 85))
                            for _ in range(2000)])
    # WHEN aggregated on the tile code (hot path) and on the quadkey string
    fast = T.aggregate_cells(df, T.WindowSpec(), 9).collect()
    slow = T.aggregate_windows(T.with_quadkey(df, 9), T.WindowSpec()).collect()
    # THEN the results are identical
    assert sorted(map(tuple, fast)) == sorted(map(tuple, slow))
    assert sum(r["events"] for r in fast) == 2000


def test_sliding_windows_count_each_event_in_length_over_slide_windows(spark) -> None:
    # GIVEN 10 events spread over 100 s
    base = 1_700_000_040
    df = T.with_quadkey(_events_df(spark, [(base + 10 * i, 1.0, 1.0) for i in range(10)]), 10)
    # WHEN aggregated with 60 s windows sliding every 20 s
    rows = T.aggregate_windows(df, T.WindowSpec("60 seconds", "20 seconds")).collect()
    # THEN every event is counted 3 times in total
    assert sum(r["events"] for r in rows) == 30


# ---------------------------------------------------------------------------
# Rollup and cost
# ---------------------------------------------------------------------------


def _reference_rollup(fine: dict[str, int], gz: int, z: int, refine: int) -> dict[str, int]:
    levels: dict[int, Counter[str]] = defaultdict(Counter)
    for qk, n in fine.items():
        for level in range(gz, z + 1):
            levels[level][qk[:level]] += n
    out = dict(levels[gz])
    for level in range(gz + 1, z + 1):
        for qk, n in levels[level].items():
            if levels[level - 1][qk[:-1]] > refine:
                out[qk] = n
    return out


def _fine_df(spark, fine: dict[str, int], start: int = 1_700_000_040):
    ws, we = datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(start + 60, UTC)
    return spark.createDataFrame([(ws, we, qk, n) for qk, n in fine.items()],
                                 "window_start timestamp, window_end timestamp, quadkey string, events long")


def test_rollup_matches_a_reference_quadtree_and_respects_the_size_bound(spark) -> None:
    # GIVEN skewed fine counts at zoom 9 (a hot spot plus a sparse background)
    rnd = random.Random(3)
    fine: Counter[str] = Counter()
    for _ in range(4000):
        hot = rnd.random() < 0.7
        qk = "0123" + "".join(rnd.choice("0123") for _ in range(5)) if hot else \
            "".join(rnd.choice("0123") for _ in range(9))
        fine[qk] += 1
    gz, z, refine = 4, 9, 50
    # WHEN rolled up
    rows = T.rollup_quadtree(_fine_df(spark, dict(fine)), T.RollupSpec(gz, z, refine)).collect()
    got = {r["quadkey"]: r["events"] for r in rows}
    # THEN it equals the reference, the grid holds every event once, zoom is the quadkey length, size is bounded
    assert got == _reference_rollup(dict(fine), gz, z, refine)
    assert sum(n for q, n in got.items() if len(q) == gz) == 4000
    assert all(r["zoom"] == len(r["quadkey"]) for r in rows)
    assert len(got) <= 4 ** gz + 4 * (z - gz) * 4000 / refine
    assert all(r["cost"] is None for r in rows)


def test_rollup_rejects_a_grid_zoom_deeper_than_zoom(spark) -> None:
    # GIVEN / WHEN / THEN grid_zoom > zoom is refused, naming both values
    with pytest.raises(ValueError, match=r"grid_zoom=13.*zoom=12"):
        T.rollup_quadtree(_fine_df(spark, {"0": 1}), T.RollupSpec(13, 12, 5))


def test_cost_join_uses_the_deepest_rate_and_falls_back_to_events_for_unknown_cells(spark) -> None:
    # GIVEN fine counts in three grid cells, a rate for grid cell "00", a finer rate under it, none for "01"/"02"
    fine = {"0000": 10, "0001": 10, "0100": 5, "0200": 4}
    rates = spark.createDataFrame([("00", 2.0), ("0001", 3.0), ("03", 9.0)], "quadkey string, rate double")
    # WHEN the cost is joined and rolled up (grid zoom 2, zoom 4, refine everything)
    with_cost = T.with_cost(_fine_df(spark, fine), rates, (2, 4))
    rows = {r["quadkey"]: r for r in T.rollup_quadtree(with_cost, T.RollupSpec(1, 4, 0)).collect()}
    # THEN cost = events * deepest rate; null where no rate is known; mixed rows add events for unknown cells
    assert rows["0000"]["cost"] == pytest.approx(20.0)
    assert rows["0001"]["cost"] == pytest.approx(30.0)
    assert rows["00"]["cost"] == pytest.approx(50.0)
    assert rows["01"]["cost"] is None and rows["0100"]["cost"] is None
    assert rows["0"]["cost"] == pytest.approx(50.0 + 5 + 4)
    assert rows["0"]["events"] == 29


def test_cold_start_has_no_cost(spark) -> None:
    # GIVEN no rates (cold start)
    df = T.with_cost(_fine_df(spark, {"0000": 3}), None)
    # WHEN / THEN cost is null, so the partitioner falls back to events
    assert df.first()["cost"] is None


def test_snapshot_rows_pipeline_end_to_end(spark) -> None:
    # GIVEN valid events around one point in one window
    base = 1_700_000_040
    df = _events_df(spark, [(base + i % 50, 13.4 + i * 1e-4, 52.5) for i in range(100)])
    # WHEN the batch convenience pipeline runs
    rows = T.snapshot_rows(df, T.WindowSpec(), T.RollupSpec(10, 14, 60)).collect()
    # THEN the grid rows hold all 100 events and refinement rows exist under the hot cell
    assert sum(r["events"] for r in rows if r["zoom"] == 10) == 100
    assert any(r["zoom"] > 10 for r in rows)
    assert math.isclose(sum(r["events"] for r in rows if r["zoom"] == 10), 100)


TABLE = json.loads((Path(__file__).resolve().parents[1] / "events" / "event_rules.json").read_text())["cases"]


def test_the_shared_event_table(spark) -> None:
    # GIVEN every case of the one event table the router and worker rules are also tested against
    df = spark.createDataFrame([(c["raw"], c["case"]) for c in TABLE], "value string, source string")
    # WHEN the Spark job classifies them
    classified = T.classify_events(df)
    valid = {r["source"] for r in T.valid_events(classified).collect()}
    bad = {r["source"]: r for r in T.quarantine_records(classified).collect()}
    # THEN each is valid, or quarantined with the table's code and a reason naming the bad value
    wrong = []
    for c in TABLE:
        if c["code"] is None:
            if c["case"] not in valid:
                wrong.append((c["case"], "should be valid", bad.get(c["case"], {}).get("reason")))
        elif c["case"] not in bad or bad[c["case"]]["code"] != c["code"] or \
                str(c["names"]).lower() not in bad[c["case"]]["reason"].lower():
            wrong.append((c["case"], c["code"], bad[c["case"]]["reason"] if c["case"] in bad else "valid"))
    assert not wrong, wrong
