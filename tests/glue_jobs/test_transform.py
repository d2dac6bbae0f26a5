"""Tests for glue_jobs.transform: windows, rollup, cost."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from datetime import UTC, datetime

import pytest

from glue_jobs.quadkeys import with_quadkey
from glue_jobs.transform import (
    RollupSpec,
    WindowSpec,
    aggregate_cells,
    aggregate_windows,
    rollup_quadtree,
    snapshot_rows,
    with_cost,
)

pytestmark = pytest.mark.spark


def _events_df(spark, pts):
    return spark.createDataFrame(
        [(f"e{i}", "u", datetime.fromtimestamp(t, UTC), lat, lon) for i, (t, lon, lat) in enumerate(pts)],
        "event_id string, entity_id string, ts timestamp, lat double, lon double")


def test_tumbling_windows_split_at_window_boundaries(spark) -> None:
    # GIVEN events at t = 0, 59.999, 60 and 125 s in the same cell
    base = 1_700_000_040  # a multiple of 60
    df = with_quadkey(_events_df(spark, [(base, 1.0, 1.0), (base + 59.999, 1.0, 1.0), (base + 60, 1.0, 1.0),
                                         (base + 125, 1.0, 1.0)]), 10)
    # WHEN aggregated in 60 s tumbling windows
    rows = aggregate_windows(df, WindowSpec("60 seconds")).orderBy("window_start").collect()
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
    fast = aggregate_cells(df, WindowSpec(), 9).collect()
    slow = aggregate_windows(with_quadkey(df, 9), WindowSpec()).collect()
    # THEN the results are identical
    assert sorted(map(tuple, fast)) == sorted(map(tuple, slow))
    assert sum(r["events"] for r in fast) == 2000


def test_sliding_windows_count_each_event_in_length_over_slide_windows(spark) -> None:
    # GIVEN 10 events spread over 100 s
    base = 1_700_000_040
    df = with_quadkey(_events_df(spark, [(base + 10 * i, 1.0, 1.0) for i in range(10)]), 10)
    # WHEN aggregated with 60 s windows sliding every 20 s
    rows = aggregate_windows(df, WindowSpec("60 seconds", "20 seconds")).collect()
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
    rows = rollup_quadtree(_fine_df(spark, dict(fine)), RollupSpec(gz, z, refine)).collect()
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
        rollup_quadtree(_fine_df(spark, {"0": 1}), RollupSpec(13, 12, 5))


def test_cost_join_uses_the_deepest_rate_and_falls_back_to_events_for_unknown_cells(spark) -> None:
    # GIVEN fine counts in three grid cells, a rate for grid cell "00", a finer rate under it, none for "01"/"02"
    fine = {"0000": 10, "0001": 10, "0100": 5, "0200": 4}
    rates = spark.createDataFrame([("00", 2.0), ("0001", 3.0), ("03", 9.0)], "quadkey string, rate double")
    # WHEN the cost is joined and rolled up (grid zoom 2, zoom 4, refine everything)
    costed = with_cost(_fine_df(spark, fine), rates, (2, 4))
    rows = {r["quadkey"]: r for r in rollup_quadtree(costed, RollupSpec(1, 4, 0)).collect()}
    # THEN cost = events * deepest rate; null where no rate is known; mixed rows add events for unknown cells
    assert rows["0000"]["cost"] == pytest.approx(20.0)
    assert rows["0001"]["cost"] == pytest.approx(30.0)
    assert rows["00"]["cost"] == pytest.approx(50.0)
    assert rows["01"]["cost"] is None and rows["0100"]["cost"] is None
    assert rows["0"]["cost"] == pytest.approx(50.0 + 5 + 4)
    assert rows["0"]["events"] == 29


def test_cold_start_has_no_cost(spark) -> None:
    # GIVEN no rates (cold start)
    df = with_cost(_fine_df(spark, {"0000": 3}), None)
    # WHEN / THEN cost is null, so the partitioner falls back to events
    assert df.first()["cost"] is None


def test_snapshot_rows_pipeline_end_to_end(spark) -> None:
    # GIVEN valid events around one point in one window
    base = 1_700_000_040
    df = _events_df(spark, [(base + i % 50, 13.4 + i * 1e-4, 52.5) for i in range(100)])
    # WHEN the batch convenience pipeline runs
    rows = snapshot_rows(df, WindowSpec(), RollupSpec(10, 14, 60)).collect()
    # THEN the grid rows hold all 100 events and refinement rows exist under the hot cell
    assert sum(r["events"] for r in rows if r["zoom"] == 10) == 100
    assert any(r["zoom"] > 10 for r in rows)
    assert math.isclose(sum(r["events"] for r in rows if r["zoom"] == 10), 100)
