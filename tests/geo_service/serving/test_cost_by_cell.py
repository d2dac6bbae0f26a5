"""The whole path's CPU of a batch reaches its events' cells (geo_service.serving.rows.charge, issue #60)."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import path_kit
import pytest

from geo_service.adapters.aws import Clients
from geo_service.pipeline.cost import Calibration, CostTracker
from geo_service.pipeline.transform import GeoTransform, ReverseGeocoder
from geo_service.serving.batches import BatchProcessor


class PerEvent:
    """A transform with no batch form: the worker calls ``apply`` per event and times each call."""

    def load_region(self, quadkeys: Any, buffer_ring: int) -> None:
        pass

    def apply(self, event: Any) -> dict[str, Any]:
        return {"seen": True}


class Ticks:
    """A CPU timer that moves by 1 s at each reading."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.mark.parametrize("make", [ReverseGeocoder, PerEvent])
def test_every_cpu_second_of_a_batch_reaches_the_cells_of_its_events(make: type[GeoTransform]) -> None:
    # GIVEN one batch of 500 events around London and the world, a worker whose CPU timer moves by 1 s at each
    # reading, and a transform with a batch form (the geocoder) or without one (timed per event)
    ticks = Ticks()
    tracker = CostTracker(Calibration(0.004), 12, 1e9, clock=lambda: 0.0, cpu_timer=ticks)
    clock = itertools.count(1_796_601_800_000)
    proc = BatchProcessor(Clients(s3=path_kit._S3(), kinesis=None, dynamodb=None), "out", "quar", "costs", 12, "o-1",
                          wall=lambda: next(clock) / 1000, monotonic=lambda: 0.0)
    slot = path_kit.slot(make())
    batch = next(path_kit.batches(path_kit.events(500), 500))
    # WHEN the batch is processed
    proc.process(batch, slot, tracker)
    report = tracker.take()
    # THEN the CPU charged is all the timer counted over the batch, and every event is counted in its cell
    assert sum(report.cpu_seconds.values()) == pytest.approx(ticks.now - 1.0)
    assert sum(report.events.values()) == len(slot.output.lines) == 500
    # AND with a batch form each cell's share is in proportion to its events (one mean cost per event); timed per
    # event, a cell also holds its own calls' seconds (2 readings, 1 s, per event)
    rates = {q: report.cpu_seconds[q] / n for q, n in report.events.items()}
    if make is ReverseGeocoder:
        assert max(rates.values()) == pytest.approx(min(rates.values()))
    else:
        assert min(rates.values()) > 1.0 and Counter(report.events).total() == 500
