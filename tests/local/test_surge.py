"""--surge: the crowd the replay sends on top of its rate, and the report's relief of it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from geokernel.geo.tiles import Tile, quadkey, tile
from geokernel.partition_spec.model import Partition
from local.config import parse_args
from local.dataset import SURGE_SHARE, EventFactory, Scenario, load_places, surge_crowd
from local.environment import surge_env
from local.replay import Replayer
from local.report.surge import relief_of
from tests.geokernel.surge.surge_testkit import row_spec
from tests.local.test_replay import Clock, FakeKinesis

START = 1_000_000.0


def crowd_replayer(rate: float = 100.0) -> tuple[Replayer, FakeKinesis, Clock, Any]:
    places = load_places("world")
    scenario = Scenario(4.0, 3600.0, 20)
    crowd = surge_crowd(places, scenario.hotspot_place, np.random.default_rng(1), cap=500.0, window_s=15.0)
    kinesis, clock = FakeKinesis(), Clock(START)
    r = Replayer(kinesis, "ingest", EventFactory(places, scenario, 7), rate, 100.0, clock=clock, crowd=crowd,
                 bad_at=2.0)
    return r, kinesis, clock, crowd


def test_the_crowd_ramps_up_within_a_window_on_top_of_the_replay_rate_at_its_place():
    # GIVEN a 100 s replay at 100 events/s with a crowd of 80 % of a 500-event cap per 15 s window, from 60 %
    r, kinesis, clock, crowd = crowd_replayer()
    assert crowd.rate_per_s == pytest.approx(SURGE_SHARE * 500 / 15) and crowd.ramp_s == 15.0
    # WHEN it runs to the end
    while not r.done:
        r.step()
        clock.now += 0.5
    events = kinesis.events()
    crowd_events = [e for e in events if str(e["entity_id"]).startswith("crowd-")]
    # THEN the crowd came at 60 s (its first event a second later, as the ramp makes one), ramped over 15 s, then held
    # its rate: about rate x (40 - 15 / 2) events
    assert START + 60.0 < (r.crowd_began_at or 0) <= START + 62.0
    assert len(crowd_events) == pytest.approx(crowd.rate_per_s * (40 - 7.5), rel=0.03)
    assert len(events) - len(crowd_events) == pytest.approx(100 * 100, rel=0.01)
    first = [e for e in crowd_events if e["ts"] < (START + 67.5) * 1000]
    assert len(first) == pytest.approx(crowd.arrived(7.5), abs=crowd.rate_per_s)  # a quarter of the ramp's
    # AND nearly all of it lands in the crowd place's grid cell
    home = tile(crowd.lon, crowd.lat, 12)
    inside = sum(tile(e["lon"], e["lat"], 12) == home for e in crowd_events)
    assert inside >= 0.9 * len(crowd_events)


def test_surge_flag_and_its_meter_settings():
    # GIVEN --surge
    cfg = parse_args(["--surge", "--quick"])
    # WHEN the routers' environment is made
    surge = json.loads(surge_env(cfg))
    # THEN the meter counts one-second intervals three at a time and projects over the local relief
    assert cfg.surge and surge["bucket_share"] * cfg.window_s == pytest.approx(1.0) and surge["recent_buckets"] == 3
    # AND --surge does not go with a recorded log
    with pytest.raises(ValueError, match="--surge does not apply with --events"):
        parse_args(["--surge", "--events", "log.csv"])


@dataclass
class Timeline:
    flipped_at: float | None


@dataclass
class Observer:
    flips: list[tuple[int | None, int, float]]
    specs: dict[int, Any]
    at: dict[int, float] = field(default_factory=dict)

    def timeline(self, v: int) -> Timeline:
        return Timeline(self.at.get(v))


def test_relief_is_the_first_flip_that_takes_the_crowds_cell_off_its_worker():
    # GIVEN the crowd's cell on w0001 in v1 (live before the crowd), v2 (a window spec keeping it) and v3 (a relief
    # moving it to w0002), flipped 5 s and 20 s after the crowd's first event
    _, _, _, crowd = crowd_replayer()
    t = tile(crowd.lon, crowd.lat, 12)
    qk = quadkey(Tile(t.x, t.y, 12))
    base = row_spec([[100.0], [100.0]])

    def with_cell_on(worker: str, version: int, relief: bool) -> Any:
        parts = (*base.partitions, Partition("p0009", worker, (qk,), 50.0))
        src = {**base.source, **({"relief": {"cells": [qk]}} if relief else {})}
        loads = {w.id: w.load + (50.0 if w.id == worker else 0.0) for w in base.workers}
        return base.replace(version=version, partitions=parts, source=src,
                            workers=tuple(w.__class__(w.id, loads[w.id], w.hash_key) for w in base.workers))

    began = 500.0
    obs = Observer([(None, 1, 0), (1, 2, 0), (2, 3, 0)], {1: with_cell_on("w0001", 1, False),
                                                         2: with_cell_on("w0001", 2, False),
                                                         3: with_cell_on("w0002", 3, True)},
                   {1: 100.0, 2: began + 5, 3: began + 20})

    class Rep:
        crowd_began_at = began

    class State:
        def __init__(self) -> None:
            self.crowd, self.replayer, self.observer, self.surge_invocations = crowd, Rep(), obs, []
            self.started_at = 0.0

    # WHEN the report finds the relief
    rel = relief_of(State(), _NoCells())  # type: ignore[arg-type]
    # THEN it is v3's flip, 20 s after the crowd came, by the fast path, from w0001 to w0002
    assert rel is not None and (rel.version, rel.seconds, rel.by_fast_path) == (3, 20.0, True)
    assert (rel.holder_before, rel.holder_after) == ("w0001", "w0002") and rel.ok


class _NoCells:
    window_s = 15.0

    def cells(self) -> list[Any]:
        return []
