"""The worker's CloudWatch metrics: one embedded-metric-format (EMF) line on stdout every ``METRICS_INTERVAL_S``.

A worker is a long-running process, not a Lambda invocation, so it flushes its Powertools metrics itself
(https://docs.powertools.aws.dev/lambda/python/latest/core/metrics/ "Flushing metrics manually"): the slot runner
calls :meth:`WorkerMetrics.tick` every step and the line is written once ``interval_s`` passed since the last one,
and once more when the process ends (:meth:`WorkerMetrics.flush`). The container's ``awslogs`` driver sends stdout to
CloudWatch Logs, which extracts the metrics from the line without further setup (PutLogEvents needs no
``x-amzn-logs-format`` header: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Generation_PutLogEvents.html).

**Dimensions.** The line's one dimension set is :func:`~geokernel.contracts.metric_names.metric_dimensions`:
``service=geo-worker`` and ``deployment=<GEO_PREFIX>``: 1,000 workers of a deployment write the same few metrics, and
the alarms name them in advance. What differs per worker goes into the line's other members (EMF properties: logged,
queryable with Logs Insights or Contributor Insights, no metric): ``owner`` (the process), ``version`` and
``worker_id`` (the slot it serves), ``behind_ms`` (its largest lag) and ``shards_behind_ms`` (the lag per
``<stream>/<shard>`` it read).

**Values.** EMF takes at most 100 values per metric in a line
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html;
:data:`MAX_VALUES`). Counts are one sum per line. ``TransformTime`` keeps a uniform sample of :data:`SAMPLE` per-event
times (reservoir sampling) and writes all of them when they fit, else evenly spaced quantiles of the sample, so
CloudWatch's percentiles over the deployment weigh each worker's line alike. ``MillisBehindLatest`` is one value per
line: the largest ``MillisBehindLatest`` a GetRecords call returned since the last line (an idle worker writes none).

Each process has its own Powertools ``EphemeralMetrics`` (``Metrics`` shares its values between the instances of a
process, and tests run many workers in one). The line is written with one ``write`` call under a lock, so it never
interleaves with a log line; ``POWERTOOLS_METRICS_DISABLED=true`` turns the lines off, as for the Lambdas.
"""

from __future__ import annotations

import json
import random
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, TextIO

import numpy as np
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from geokernel.contracts.metric_names import DEPLOYMENT_DIMENSION, NAMESPACE, Metric, MetricService

#: Most values of one metric in one EMF line: the format allows 100, and Powertools writes a line of its own (on
#: ``print``) when a metric reaches 100.
MAX_VALUES = 99
#: Per-event transform times a line's sample holds (reservoir sampling).
SAMPLE = 1000
#: Default seconds between two lines (``METRICS_INTERVAL_S``): the metrics' one-minute resolution.
INTERVAL_S = 60.0


def spread(values: list[float], limit: int = MAX_VALUES) -> list[float]:
    """``values`` if there are at most ``limit``, else ``limit`` evenly spaced quantiles of them (min and max kept)."""
    if len(values) <= limit:
        return list(values)
    ordered = sorted(values)
    last = len(ordered) - 1
    return [ordered[round(k * last / (limit - 1))] for k in range(limit)]


class WorkerMetrics:
    """A worker process's metrics since its last EMF line; see the module docstring.

    Parameters
    ----------
    deployment : str
        The ``deployment`` dimension (``GEO_PREFIX``).
    interval_s : float
        Seconds between two lines (``METRICS_INTERVAL_S``); 0 writes none (the scale simulation's virtual workers).
    clock : callable
        Monotonic seconds (the worker's timebase).
    stream : text stream, optional
        Where the lines go (default: ``sys.stdout`` when written).
    """

    def __init__(self, deployment: str, *, interval_s: float = INTERVAL_S, clock: Callable[[], float],
                 stream: TextIO | None = None) -> None:
        self.deployment = deployment
        self.interval_s = interval_s
        self.clock = clock
        self.stream = stream
        self.context: Callable[[], Mapping[str, Any]] = dict
        self._lock = threading.Lock()
        self._rng = random.Random(0)
        self._last = clock()
        self._reset()

    @property
    def enabled(self) -> bool:
        return self.interval_s > 0

    def _reset(self) -> None:
        self._counts = dict.fromkeys((Metric.EVENTS_PROCESSED, Metric.EVENTS_QUARANTINED, Metric.TRANSFORM_ERRORS,
                                      Metric.GEO_READ_THROTTLED), 0)
        self._times: list[float] = []
        self._timed = 0
        self._flush_ages: list[float] = []
        self._behind: dict[str, int] = {}

    # ------------------------------------------------------------------ recording
    def transformed(self, seconds: float, failed: bool = False) -> None:
        """One event through the transform: its time, and whether it raised."""
        if not self.enabled:
            return
        with self._lock:
            self._timed += 1
            if len(self._times) < SAMPLE:
                self._times.append(seconds)
            else:
                k = self._rng.randrange(self._timed)
                if k < SAMPLE:
                    self._times[k] = seconds
            if failed:
                self._counts[Metric.TRANSFORM_ERRORS] += 1

    def transformed_many(self, seconds: float, n: int) -> None:
        """``n`` events through a batch transform, ``seconds`` each (the batch's time over its events): the same
        uniform sample as ``n`` calls of :meth:`transformed`, drawn for the batch at once (NumPy, seeded from the
        sample's generator) instead of one draw per event."""
        if not self.enabled or n <= 0:
            return
        with self._lock:
            free = min(n, SAMPLE - len(self._times))
            self._times += [seconds] * free
            self._timed += free
            rest = n - free
            if rest:
                seen = np.arange(self._timed + 1, self._timed + rest + 1)
                picks = (np.random.default_rng(self._rng.getrandbits(64)).random(rest) * seen).astype(np.int64)
                for k in picks[picks < SAMPLE].tolist():
                    self._times[k] = seconds
                self._timed += rest

    def written(self, rows: int, quarantined: int, age_s: float) -> None:
        """One output flush: the rows and quarantine records it wrote, and how long its oldest row waited."""
        if not self.enabled:
            return
        with self._lock:
            self._counts[Metric.EVENTS_PROCESSED] += rows
            self._counts[Metric.EVENTS_QUARANTINED] += quarantined
            self._flush_ages.append(max(0.0, age_s))

    def read(self, source: str, millis_behind: int | None, throttled: bool = False) -> None:
        """One GetRecords call on ``source`` (``<stream>/<shard>``): the lag it returned (None when it failed), or a
        throttle."""
        if not self.enabled:
            return
        with self._lock:
            if throttled:
                self._counts[Metric.GEO_READ_THROTTLED] += 1
            if millis_behind is not None:
                self._behind[source] = max(self._behind.get(source, 0), int(millis_behind))

    # ------------------------------------------------------------------ writing
    def tick(self) -> bool:
        """Write a line if ``interval_s`` passed since the last one; True if one was written."""
        if not self.enabled or self.clock() - self._last < self.interval_s:
            return False
        return self.flush()

    def flush(self) -> bool:
        """Write what was recorded since the last line (nothing when nothing was); True if a line was written."""
        if not self.enabled:
            return False
        with self._lock:
            self._last = self.clock()
            doc = self._document()
            self._reset()
            if doc is None or is_metrics_disabled():
                return False
            (self.stream or sys.stdout).write(json.dumps(doc, separators=(",", ":"), default=str) + "\n")
        return True

    def _document(self) -> dict[str, Any] | None:
        """The EMF line of what was recorded (Powertools serializes and validates it), or None when empty."""
        counts, times, ages, behind = self._counts, self._times, self._flush_ages, self._behind
        if not (any(counts.values()) or times or ages or behind):
            return None
        emf = EphemeralMetrics(namespace=NAMESPACE, service=MetricService.WORKER.value)
        emf.set_default_dimensions(**{DEPLOYMENT_DIMENSION: self.deployment})
        for name, n in counts.items():
            emf.add_metric(name=name, unit=MetricUnit.Count, value=n)
        for t in spread(times):
            emf.add_metric(name=Metric.TRANSFORM_TIME, unit=MetricUnit.Milliseconds, value=round(t * 1000.0, 4))
        for age in spread(ages):
            emf.add_metric(name=Metric.OUTPUT_FLUSH_AGE, unit=MetricUnit.Seconds, value=round(age, 3))
        if behind:
            emf.add_metric(name=Metric.MILLIS_BEHIND_LATEST, unit=MetricUnit.Milliseconds, value=max(behind.values()))
            emf.add_metadata("behind_ms", max(behind.values()))
            emf.add_metadata("shards_behind_ms", dict(sorted(behind.items())))
        for key, value in self.context().items():
            emf.add_metadata(key, value)
        return dict(emf.serialize_metric_set())
