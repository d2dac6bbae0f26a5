"""Control-table records: the snapshot-to-live latency samples (written at the flip, read by the partitioner)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from geokernel.contracts.control import LATENCY_SAMPLES, ControlKey
from geokernel.partition_spec.model import Spec
from lambdas.deploy.controller import DeployController
from lambdas.deploy.fleet import EcsFleet
from lambdas.runtime.ecs import EcsService
from lambdas.runtime.records import median_latency_s, read_latency_samples, record_live_latency
from tests.lambdas.conftest import Aws, make_spec

ENDED = datetime(2026, 11, 21, 10, 5, tzinfo=UTC)


def ended(spec: Spec, at: datetime = ENDED) -> Spec:
    return spec.replace(source={**spec.source, "window_end": at.strftime("%Y-%m-%dT%H:%M:%SZ")})


def test_a_flip_records_the_snapshot_to_live_latency(aws: Aws) -> None:
    # GIVEN spec v1 built from the window ending at 10:05, published and ready
    spec = ended(make_spec(1))
    aws.specs.put_new(spec)
    fleet = EcsFleet(EcsService(aws.clients.ecs, aws.cfg.ecs_cluster, aws.cfg.ecs_service))
    live_at = ENDED.timestamp() + 420.0
    ctl = DeployController(aws.control, aws.leases, aws.specs, aws.streams, fleet, clock=lambda: live_at)
    # WHEN the deploy controller flips the active pointer to it
    assert ctl.flip(1)
    # THEN pk="latency" holds one sample of 420 s for v1, and the partitioner's reader sees it
    samples = read_latency_samples(aws.control)
    assert [(s.version, s.snapshot_end, s.latency_s) for s in samples] == [(1, "2026-11-21T10:05:00Z", 420.0)]
    assert median_latency_s(samples) == 420.0
    # AND a repeated flip of the same version (a retried step) records nothing more
    assert ctl.flip(1) and len(read_latency_samples(aws.control)) == 1


def test_samples_keep_the_last_twenty_and_replace_a_version_seen_again(aws: Aws) -> None:
    for v in range(1, 26):
        record_live_latency(aws.control, ended(make_spec(v)), ENDED.timestamp() + 100.0 + v)
    record_live_latency(aws.control, ended(make_spec(25)), ENDED.timestamp() + 900.0)
    samples = read_latency_samples(aws.control)
    assert len(samples) == LATENCY_SAMPLES and [s.version for s in samples] == list(range(6, 26))
    assert samples[-1].latency_s == 900.0 and median_latency_s(samples) == pytest.approx(115.5)


def test_a_spec_without_a_window_end_records_nothing(aws: Aws) -> None:
    assert record_live_latency(aws.control, make_spec(1), ENDED.timestamp()) is None
    assert aws.control.get(ControlKey.LATENCY) is None and median_latency_s(read_latency_samples(aws.control)) is None


def test_a_malformed_latency_item_reads_as_no_samples(aws: Aws) -> None:
    aws.control.put(ControlKey.LATENCY, {"samples": [{"version": "one"}]})
    assert read_latency_samples(aws.control) == ()
    # and the next flip overwrites it with a good sample
    assert record_live_latency(aws.control, ended(make_spec(2)), ENDED.timestamp() + 60.0) is not None
    assert [s.version for s in read_latency_samples(aws.control)] == [2]
