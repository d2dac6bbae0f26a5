"""lambdas.runtime.metrics and the router's throttle count: every function metric carries the deployment dimension."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import ClientError

from geokernel.contracts.metric_names import NAMESPACE, Metric, MetricService, metric_dimensions
from lambdas.router import handler as router_handler
from lambdas.runtime.kinesis import GeoStreams, PutEntry
from lambdas.runtime.metrics import deployment_of, function_metrics
from tests.lambdas.conftest import CTX, Aws, load_event, make_spec
from tests.lambdas.test_router import activate


@pytest.fixture()
def shared_defaults() -> Iterator[None]:
    """Powertools keeps the default and current dimensions in dicts shared by every ``Metrics`` of the process (the
    handlers' too): put them back after the test."""
    shared = (Metrics._default_dimensions, Metrics._dimensions)
    saved = [dict(d) for d in shared]
    yield
    for d, before in zip(shared, saved, strict=True):
        d.clear()
        d.update(before)


@pytest.fixture(autouse=True)
def metrics_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Metrics as a function has them (the local loop's in-process handlers turn them off for the process)."""
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)


def emf_lines(out: str) -> list[dict[str, Any]]:
    return [doc for doc in map(json.loads, filter(None, out.splitlines())) if "_aws" in doc]


def test_the_deployment_is_the_prefix_or_the_default() -> None:
    # GIVEN the environment of a function of prefix "alpha", and one without GEO_PREFIX
    # THEN the deployment is the prefix, else the default prefix
    assert deployment_of({"GEO_PREFIX": " alpha "}) == "alpha"
    assert deployment_of({}) == "georebal"


@pytest.mark.usefixtures("shared_defaults")
def test_a_function_metric_has_the_service_and_deployment_dimension_set(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the metrics of a deployer of deployment "alpha"
    metrics = function_metrics(MetricService.DEPLOYER, {"GEO_PREFIX": "alpha"})
    # WHEN a metric is added and flushed twice (Powertools clears the dimensions after a flush)
    for _ in range(2):
        metrics.add_metric(name="DeployStatus_idle", unit=MetricUnit.Count, value=1)
        metrics.flush_metrics()
    # THEN both EMF lines hold exactly the one dimension set the alarms read: service and deployment
    lines = emf_lines(capsys.readouterr().out)
    assert len(lines) == 2
    for doc in lines:
        (directive,) = doc["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == NAMESPACE
        assert [sorted(d) for d in directive["Dimensions"]] == [["deployment", "service"]]
        assert {k: doc[k] for k in directive["Dimensions"][0]} == metric_dimensions(MetricService.DEPLOYER, "alpha")


def test_the_router_reports_geo_stream_throttles(aws: Aws, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN spec v1 active and the recorded batch
    activate(aws, make_spec(1))
    router_handler.runtime.cache_clear()
    # WHEN the router handles it (nothing throttled)
    router_handler.handler(load_event("kinesis_ingest_batch.json"), CTX)
    # THEN its EMF line has GeoWriteThrottled 0 beside Routed, in the deployment's dimension set
    (doc,) = [d for d in emf_lines(capsys.readouterr().out) if Metric.ROUTED in d]
    assert doc[Metric.GEO_WRITE_THROTTLED] == [0.0] and doc[Metric.ROUTED] == [4.0]
    assert (doc["service"], doc["deployment"]) == ("router", "georebal")


class _ThrottlingKinesis:
    """PutRecords that throttles every other record, then a whole call."""

    def __init__(self) -> None:
        self.calls = 0

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls += 1
        if self.calls > 1:
            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}},
                              "PutRecords")
        return {"Records": [{"ErrorCode": "ProvisionedThroughputExceededException"} if i % 2 else
                            {"SequenceNumber": str(i), "ShardId": "shardId-0"} for i in range(len(Records))]}


def test_put_records_counts_the_throttled_records() -> None:
    # GIVEN a stream that throttles every other record of a first put and all of a second
    streams = GeoStreams(_ThrottlingKinesis())
    entries = [PutEntry(b"{}", f"e{i}", "1") for i in range(4)]
    # WHEN two puts of 4 records are made
    first = streams.put_records("s", entries)
    second = streams.put_records("s", entries)
    # THEN the failed records are returned and every throttled one is counted
    assert (first, second) == ([1, 3], [0, 1, 2, 3])
    assert streams.throttled == 2 + 4
