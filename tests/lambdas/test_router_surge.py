"""The router's surge meter: what an environment routes is counted, a worker heading past its cap is signalled once."""

from __future__ import annotations

import json

import numpy as np
import pytest

from geokernel.contracts.surge import SIGNAL_PREFIX, SurgeSignal
from geokernel.geo.tiles import Tile, bounds
from geokernel.surge.meter import SurgeSettings
from lambdas.router import handler as router_handler
from lambdas.router.routing import RoutingTable
from lambdas.router.surge import SurgeWatch
from lambdas.runtime.config import ConfigError, LambdaConfig
from lambdas.runtime.s3 import SurgeStore
from tests.geokernel.surge.surge_testkit import cell, row_spec
from tests.lambdas.conftest import Aws


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def points(rng: np.random.Generator, counts: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """``counts[i]`` points inside cell ``i`` of the test row."""
    lon, lat = [], []
    for i, n in counts.items():
        b = bounds(Tile(*cell(i), 12))
        lon += list(rng.uniform(b.west, b.east, n))
        lat += list(rng.uniform(b.south, b.north, n))
    return np.array(lon), np.array(lat)


def crowd_minutes(watch: SurgeWatch, table: RoutingTable, clock: Clock) -> list[SurgeSignal]:
    """Twelve quiet minutes then a crowd ramping onto cell 5, one batch every 10 s; every signal."""
    rng = np.random.default_rng(3)
    found: list[SurgeSignal] = []
    for step in range(6 * 20):
        clock.now = step * 10.0
        minute = step / 6.0
        counts = {i: int(rng.poisson(212.5 / 30)) for i in range(12)}
        counts[5] += int(rng.poisson(max(0.0, minute - 12) * 100 / 30))
        found += watch.observe(table, *points(rng, counts))
    return found


def test_an_environment_counts_what_it_routes_and_signals_a_worker_heading_past_its_cap_once() -> None:
    # GIVEN an environment's meter on a spec of three workers at 85 % (5-minute windows: 1-minute intervals)
    table = RoutingTable(row_spec([[212.5] * 4, [212.5] * 4, [212.5] * 4]), "g-v3")
    clock = Clock()
    watch = SurgeWatch(SurgeSettings(), clock)
    # WHEN it routes twelve quiet minutes, then a crowd ramping onto cell 5 by 10 % of the cap a minute
    found = crowd_minutes(watch, table, clock)
    # THEN the worker holding cell 5 is signalled, once, after the ramp began
    assert [(s.worker, s.version) for s in found] == [("w0002", 3)]
    assert found[0].at > 12 * 60


def test_a_signal_is_put_once_whichever_environment_sees_it_first(aws: Aws) -> None:
    # GIVEN two environments that both saw the same surge
    table = RoutingTable(row_spec([[212.5] * 4, [212.5] * 4, [212.5] * 4]), "g-v3")
    clock = Clock()
    (signal,) = crowd_minutes(SurgeWatch(SurgeSettings(), clock), table, clock)
    store = SurgeStore(aws.clients.s3, aws.cfg.specs_bucket)
    first = router_handler.Runtime(None, None, None, signals=store)  # type: ignore[arg-type]
    # WHEN each puts it
    router_handler.put_signals(first, [signal])
    router_handler.put_signals(first, [signal])
    # THEN one object is stored under the signal's key, and it reads back as the signal
    keys = aws.keys(aws.cfg.specs_bucket, SIGNAL_PREFIX)
    assert keys == [signal.key]
    assert store.signal(signal.key) == signal
    assert not store.put_signal(signal)


def test_no_meter_feed_without_a_watch_or_a_table() -> None:
    # GIVEN a runtime without a meter (SURGE_JSON=off), and one with a meter but no active spec
    table = RoutingTable(row_spec([[100.0]]), "g-v3")
    off = router_handler.Runtime(None, None, None)  # type: ignore[arg-type]
    on = router_handler.Runtime(None, None, None, surge=SurgeWatch(SurgeSettings()))  # type: ignore[arg-type]
    # WHEN the handler asks for the batch's feed
    # THEN there is none (nothing is counted)
    assert router_handler.surge_feed(off, table, []) is None
    assert router_handler.surge_feed(on, None, []) is None
    assert router_handler.surge_feed(on, table, []) is not None


def test_surge_json_off_and_bad_values() -> None:
    # GIVEN SURGE_JSON set to off, to a bad key
    # WHEN the config is read
    # THEN off is kept and a bad key is named
    assert LambdaConfig.from_env({"SURGE_JSON": "OFF"}).surge_json == "off"
    with pytest.raises(ConfigError, match="SURGE_JSON: unknown key 'nope'"):
        LambdaConfig.from_env({"SURGE_JSON": json.dumps({"nope": 1})})
