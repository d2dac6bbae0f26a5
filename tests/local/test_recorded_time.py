"""A replayed log's speeds are the recorded ones: ``builtin:nyharbor`` replayed at ``--speed 100`` (warm-up passes
first, as the local run sends it) through the stateful geofence transform as a worker runs it, against the speeds
of the recorded positions and times (haversine / dt).

Before: the transform measured time by ``ts``, the replay clock, so every speed was 100x the recorded one (a ship at
4.33 m/s showed 432.94 m/s; 7,497 of 8,392 speeds more than 1 % off), and the warm-up copies kept the entity's id,
so 280 of 295 ships' first real point got a speed from the last warm-up copy (up to 9,548.652 m/s).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from geo_service.pipeline.transform import load_transform
from local.environment import transform_env
from local.oracle import Expected, expected_fields
from local.recorded import RecordedLog, builtin_log, builtin_path, plan_replay, read_recorded
from local.replay import RecordedReplayer

SPEC = "transforms.geofence_state:GeofenceState"
SPEED = 100.0
WINDOW_S = 10.0  # --quick's
START = 1_795_255_500.0  # the wall clock of the replay's first tick (a window boundary; a plausible 2026 time)
EARTH_RADIUS_M = 6_371_008.8
#: A speed within 1 % of the recorded one, or within the transform's rounding (3 decimals) of it.
ROUNDING = 0.0005


class NullKinesis:
    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:
        return {"FailedRecordCount": 0, "Records": [{} for _ in Records]}


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def replayed() -> tuple[RecordedLog, list[dict[str, Any]]]:
    """The log, and every event the replay sent at 100x: three warm-up passes (live after 25 s), then the log once."""
    b = builtin_log("builtin:nyharbor")
    assert b is not None
    log = read_recorded(builtin_path(b), b.columns, None, b.time_unit)
    plan = plan_replay(log, SPEED, None, 180.0, WINDOW_S)
    clock, live = Clock(START), [False]
    r = RecordedReplayer(NullKinesis(), "ingest", log, plan, live=lambda: live[0], align_s=WINDOW_S, clock=clock)
    while not r.done:
        live[0] = clock.now >= START + 25
        r.step()
        clock.now += 0.5
    assert r.warmup_passes == 3 and r.recorded_sent == len(log)
    return log, r.sent_events


def run_transform(events: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Expected:
    """The transform over the events in send order, as a worker runs it (the oracle's single-process pass)."""
    monkeypatch.delenv("GEOFENCE_TIME_FIELD", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    transform = load_transform(SPEC)
    transform.load_region([""], 1)
    return expected_fields(transform, events)


def recorded_speeds(log: RecordedLog) -> dict[str, float | None]:
    """Per event id: metres over recorded seconds from the entity's previous point (None for its first point and for
    a point recorded at the same time as the previous one, which the transform skips)."""
    out: dict[str, float | None] = {}
    last: dict[str, tuple[int, float, float]] = {}
    for i in range(len(log)):
        entity, ms, lat, lon = log.entity_id[i], int(log.ms[i]), float(log.lat[i]), float(log.lon[i])
        prev = last.get(entity)
        if prev is None or ms <= prev[0]:
            out[log.event_id[i]] = None
            last.setdefault(entity, (ms, lat, lon))
            continue
        p1, p2 = math.radians(prev[1]), math.radians(lat)
        h = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lon - prev[2]) / 2) ** 2
        out[log.event_id[i]] = 2 * EARTH_RADIUS_M * math.asin(math.sqrt(h)) / ((ms - prev[0]) / 1000.0)
        last[entity] = (ms, lat, lon)
    return out


def test_a_replay_at_100x_gives_the_recorded_speeds(replayed: tuple[RecordedLog, list[dict[str, Any]]],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the replay's events and the environment the local run gives the workers and the oracle under --events
    log, events = replayed
    env = transform_env(SPEC, recorded=True)
    assert env["GEOFENCE_TIME_FIELD"] == "recorded_utc"
    # WHEN the transform runs over them in send order
    out = run_transform(events, monkeypatch, env)
    want = recorded_speeds(log)
    got = {e: out.fields[e]["speed_mps"] for e in want}
    # THEN every real event's speed is within 1 % of the recorded one (8,392 speeds on this log)
    pairs = [(got[e], w) for e, w in want.items() if w is not None]
    off = [(g, w) for g, w in pairs if g is None or abs(g - w) > max(0.01 * w, ROUNDING)]
    assert len(pairs) > 8000 and off == []
    # AND an event without a recorded speed (an entity's first point, a repeated time) has none: no state came from a
    # warm-up copy into the entity's first real point
    assert {e: got[e] for e, w in want.items() if w is None and got[e] is not None} == {}
    assert sum(w is None for w in want.values()) >= log.entity_id.distinct()


def test_measured_by_ts_the_replay_clock_the_speeds_are_100x(replayed: tuple[RecordedLog, list[dict[str, Any]]],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the same events, the transform told to measure time by ts (what it did before; the report then says
    # "REPLAY TIME")
    log, events = replayed
    # WHEN it runs over them
    out = run_transform(events, monkeypatch, {"GEOFENCE_TIME_FIELD": "ts"})
    want = recorded_speeds(log)
    # THEN a moving ship's speed is --speed times the recorded one
    ratios = [out.fields[e]["speed_mps"] / w for e, w in want.items() if w is not None and w > 0.5]
    assert len(ratios) > 1000 and float(np.median(ratios)) == pytest.approx(SPEED, rel=0.01)
