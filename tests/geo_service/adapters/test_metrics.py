"""geo_service.adapters.metrics: a worker's EMF lines, in the deployment's one dimension set, under 100 values each."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from geo_service.adapters.metrics import MAX_VALUES, WorkerMetrics, spread
from geokernel.contracts.metric_names import NAMESPACE, Metric, MetricService, metric_dimensions


@pytest.fixture(autouse=True)
def metrics_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Metrics as a worker has them (the local loop's in-process handlers turn them off for the process)."""
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lines(buf: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def test_spread_keeps_few_values_and_quantiles_of_many() -> None:
    # GIVEN 5 values and 1,000 values
    few, many = [3.0, 1.0, 2.0, 5.0, 4.0], [float(i) for i in range(1000)]
    # THEN the few stay as they are, and the many become MAX_VALUES evenly spaced quantiles with their min and max
    assert spread(few) == few
    out = spread(many)
    assert len(out) == MAX_VALUES and out[0] == 0.0 and out[-1] == 999.0 and out == sorted(out)
    assert abs(out[MAX_VALUES // 2] - 500) < 10


def test_a_line_sums_counts_samples_times_and_names_the_slot() -> None:
    # GIVEN the metrics of deployment "alpha" serving slot v3#w0002
    clock, buf = Clock(), io.StringIO()
    m = WorkerMetrics("alpha", interval_s=60, clock=clock, stream=buf)
    m.context = lambda: {"owner": "host:1:ab", "version": 3, "worker_id": "w0002"}
    # WHEN 5,000 events are transformed (2 fail), two flushes write 4,990 rows and 10 quarantined, and two shards are
    # read (one of them throttled once)
    for i in range(5000):
        m.transformed(0.001 * (i % 10), failed=i in (7, 8))
    m.written(4000, 4, 2.5)
    m.written(990, 6, 7.5)
    m.read("s-geo-v3/shardId-1", 1200)
    m.read("s-geo-v3/shardId-1", 300)
    m.read("s-geo-v3/shardId-2", 50)
    m.read("s-geo-v3/shardId-2", None, throttled=True)
    # THEN nothing is written before the interval, one line after it
    assert not m.tick() and buf.getvalue() == ""
    clock.now += 60
    assert m.tick()
    (doc,) = lines(buf)
    (directive,) = doc["_aws"]["CloudWatchMetrics"]
    # AND the line is EMF in the deployment's one dimension set, the slot and per-shard lag as properties
    assert directive["Namespace"] == NAMESPACE
    (dims,) = directive["Dimensions"]
    assert {d: doc[d] for d in dims} == metric_dimensions(MetricService.WORKER, "alpha")
    assert (doc["owner"], doc["version"], doc["worker_id"]) == ("host:1:ab", 3, "w0002")
    assert doc["shards_behind_ms"] == {"s-geo-v3/shardId-1": 1200, "s-geo-v3/shardId-2": 50}
    assert doc[Metric.MILLIS_BEHIND_LATEST] == [1200.0] and doc["behind_ms"] == 1200
    assert (doc[Metric.EVENTS_PROCESSED], doc[Metric.EVENTS_QUARANTINED]) == ([4990.0], [10.0])
    assert (doc[Metric.TRANSFORM_ERRORS], doc[Metric.GEO_READ_THROTTLED]) == ([2.0], [1.0])
    assert doc[Metric.OUTPUT_FLUSH_AGE] == [2.5, 7.5]
    # AND the transform times are a spread of a bounded sample: at most MAX_VALUES milliseconds in [0, 9]
    times = doc[Metric.TRANSFORM_TIME]
    assert len(times) == MAX_VALUES and min(times) == 0.0 and max(times) == 9.0


def test_nothing_recorded_writes_nothing_and_the_next_line_starts_afresh() -> None:
    # GIVEN metrics that wrote one line
    clock, buf = Clock(), io.StringIO()
    m = WorkerMetrics("alpha", interval_s=1, clock=clock, stream=buf)
    m.written(1, 0, 0.1)
    assert m.flush()
    # WHEN an interval passes without anything recorded THEN no line is written
    clock.now += 5
    assert not m.tick() and not m.flush()
    # AND a later line holds only what came after the first
    m.written(2, 0, 0.2)
    assert m.flush()
    assert [doc[Metric.EVENTS_PROCESSED] for doc in lines(buf)] == [[1.0], [2.0]]


def test_no_lines_when_off_or_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN metrics with interval 0 (the scale simulation), and metrics under POWERTOOLS_METRICS_DISABLED=true
    off_buf, disabled_buf = io.StringIO(), io.StringIO()
    off = WorkerMetrics("alpha", interval_s=0, clock=Clock(), stream=off_buf)
    disabled = WorkerMetrics("alpha", interval_s=1, clock=Clock(), stream=disabled_buf)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    # WHEN both record and flush
    for m in (off, disabled):
        m.written(3, 0, 1.0)
        m.transformed(0.01)
        m.flush()
    # THEN neither writes a line
    assert off_buf.getvalue() == disabled_buf.getvalue() == ""


def test_a_batch_transform_samples_its_events_as_per_event_calls_would() -> None:
    # GIVEN metrics that saw 600 events transformed one by one in 2 ms each
    clock, buf = Clock(), io.StringIO()
    m = WorkerMetrics("alpha", interval_s=60, clock=clock, stream=buf)
    for _ in range(600):
        m.transformed(0.002)
    # WHEN two batches of 2,000 events each are transformed at once, 1 ms and 5 ms per event
    m.transformed_many(0.001, 2000)
    m.transformed_many(0.005, 2000)
    clock.now += 60
    assert m.tick()
    # THEN the transform times are a spread of a uniform sample of all 4,600 events: all three times in it, the
    # batches' in proportion to their events (each ~43 % of the sample), no error counted
    (doc,) = lines(buf)
    times = doc[Metric.TRANSFORM_TIME]
    assert set(times) == {1.0, 2.0, 5.0} and len(times) == MAX_VALUES
    assert 0.3 < times.count(5.0) / len(times) < 0.56 and doc[Metric.TRANSFORM_ERRORS] == [0.0]
