"""The partitioner Lambda's cost reports: the workers' measured rates weight the load of the next spec (moto)."""

from __future__ import annotations

import json

import pytest

from geokernel.contracts.cost import CostReportRecord
from geokernel.contracts.spec_pointer import spec_key
from lambdas.partitioner.logic import apply_cost_rates, load_policy, process_snapshot
from partitioner.load.counts import counts_from_pairs
from tests.lambdas.conftest import Aws, snapshot_rows, t, write_test_snapshot
from tests.lambdas.partitioner_testkit import CELLS, deps


def cost_report(rates: dict[str, float]) -> dict[str, object]:
    """A v1 cost report of worker w0001, as the worker writes it (the contract's record)."""
    return CostReportRecord(version=1, worker="w0001", partition_ids=("p0001",), interval_s=300.0, calibration=1.0,
                            quadkey_zoom=18, rates=rates, events={}, reported_at=200.0).to_dict()


def test_cost_reports_weight_the_load_when_snapshot_has_no_cost(aws: Aws) -> None:
    # GIVEN an active v1 whose workers reported cost rates (one cell 3x as expensive per event)
    d = deps(aws)
    assert process_snapshot(d, write_test_snapshot(aws, snapshot_rows(CELLS), t(5))).status == "published"
    aws.control.put("active", {"version": 1, "spec_key": spec_key(1), "stream_name": "georebal-geo-v1",
                               "flipped_at": "x"})
    rows = snapshot_rows(CELLS)
    report = cost_report({rows[2][0]: 3.0, rows[0][0]: 1.0})
    aws.clients.s3.put_object(Bucket=aws.cfg.costs_bucket, Key="costs/v1/w0001/100.json", Body=b'{"rates": {}}')
    aws.clients.s3.put_object(Bucket=aws.cfg.costs_bucket, Key="costs/v1/w0001/200.json",
                              Body=json.dumps(report).encode())
    broken = {**report, "worker": "w0002", "rates": {rows[2][0]: -3.0}}  # AND another worker's latest is unreadable
    aws.clients.s3.put_object(Bucket=aws.cfg.costs_bucket, Key="costs/v1/w0002/200.json",
                              Body=json.dumps(broken).encode())
    # WHEN the cost rates are merged into the next snapshot's counts
    rates = d.costs.latest(1)  # type: ignore[union-attr]
    counts = counts_from_pairs([(q, float(e)) for q, e, _ in rows], "x")
    weighted = apply_cost_rates(counts, dict(rates.rates), 12)
    # THEN the latest report wins; the expensive cell weighs 3x; unknown cells get the events-weighted mean rate
    assert rates.reports == ("costs/v1/w0001/200.json",)
    # AND the unreadable report is left out whole, named with the contract's reason
    assert rates.skipped == (f"costs/v1/w0002/200.json quadkey {rows[2][0]!r}: rate must be a finite number >= 0, "
                             "got -3.0",)
    w = dict(zip(weighted.quadkeys, weighted.weights, strict=True))
    mean = (700 * 3.0 + 400 * 1.0) / 1100
    assert w[rows[2][0]] == pytest.approx(2100) and w[rows[0][0]] == pytest.approx(400)
    assert w[rows[1][0]] == pytest.approx(300 * mean)


def test_measured_cost_drives_the_next_spec(aws: Aws) -> None:
    # GIVEN v1 active, and its workers report one cell costing 3x per event (a snapshot without cost column)
    d = deps(aws, policy=load_policy('{"cooldown_s": 0}'))
    assert process_snapshot(d, write_test_snapshot(aws, snapshot_rows(CELLS), t(5))).status == "published"
    aws.control.put("active", {"version": 1, "spec_key": spec_key(1), "stream_name": "georebal-geo-v1",
                               "flipped_at": "x"})
    rows = snapshot_rows(CELLS)
    hot_cell = rows[2][0]
    report = cost_report({hot_cell: 3.0, rows[0][0]: 1.0})
    aws.clients.s3.put_object(Bucket=aws.cfg.costs_bucket, Key="costs/v1/w0001/300.json",
                              Body=json.dumps(report).encode())
    # WHEN the next window (same event counts) is processed
    out = process_snapshot(d, write_test_snapshot(aws, rows, t(10)))
    # THEN the cost-weighted load (the hot cell now 2100 > max_load 1000) makes the policy publish v2
    assert (out.status, out.version) == ("published", 2), out.reason
    v2 = aws.specs.get(spec_key(2))
    mean = (700 * 3.0 + 400 * 1.0) / 1100
    assert v2.total_load == pytest.approx(2100 + 400 + (300 + 200 + 50) * mean)
    assert all(w.load <= 1000 * (1 + 1e-6) for w in v2.workers)
