"""The partitioner Lambda's policy and controller state: hold or publish, metrics, saved state, horizon (moto)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from geokernel.contracts.spec_pointer import spec_key
from lambdas.partitioner import handler as partitioner_handler
from lambdas.partitioner.logic import load_policy, process_snapshot
from lambdas.partitioner.state import CONTROL_STATE_KEY
from lambdas.runtime.config import ConfigError
from lambdas.runtime.records import read_desired
from lambdas.runtime.s3 import ObjectStore
from partitioner.control.controller import ControlState
from tests.lambdas.conftest import Aws, snapshot_rows, t, write_test_snapshot
from tests.lambdas.partitioner_testkit import CELLS, deps, rewrite_manifest


def test_policy_holds_a_candidate_that_changes_nothing(aws: Aws) -> None:
    # GIVEN v1 published and then a snapshot with the same load in a later window
    d = deps(aws)
    assert process_snapshot(d, write_test_snapshot(aws, snapshot_rows(CELLS), t(5))).status == "published"
    # WHEN the next window arrives
    out = process_snapshot(d, write_test_snapshot(aws, snapshot_rows(CELLS), t(10)))
    # THEN the policy keeps v1 (held) and records its decision
    assert out.status == "held" and out.decision_reasons
    assert aws.keys(aws.cfg.specs_bucket, "specs/") == [spec_key(1)]
    policy = aws.control.get("policy")
    assert policy is not None and policy["last_decision"]["redeploy"] is False


def test_overload_publishes_v2_sticky_to_v1(aws: Aws) -> None:
    # GIVEN v1 and then load that overloads one of its workers
    d = deps(aws, policy=load_policy('{"cooldown_s": 0}'))
    assert process_snapshot(d, write_test_snapshot(aws, snapshot_rows(CELLS), t(5))).status == "published"
    hot = {**CELLS, (8, 8): 1900, (8, 9): 900}
    # WHEN processed
    out = process_snapshot(d, write_test_snapshot(aws, snapshot_rows(hot), t(10)))
    # THEN v2 is published after v1, names v1 as previous, and has its own stream
    assert (out.status, out.version) == ("published", 2), out.reason
    v2 = aws.specs.get(spec_key(2))
    assert v2.previous_version == 1 and v2.stream_name == "georebal-geo-v2"
    assert read_desired(aws.control).version == 2  # type: ignore[union-attr]
    # AND the outcome carries v1's busiest worker under the new load (the WorkerUtilisation metric), above 100%
    assert out.max_utilisation is not None and out.max_utilisation > 1.0


def test_metrics_for_the_dashboard_are_emitted(aws: Aws, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a live spec v1 flipped active a minute ago, and a second snapshot
    d = deps(aws, policy=load_policy('{"cooldown_s": 0}'))
    assert process_snapshot(d, write_test_snapshot(aws, snapshot_rows(CELLS), t(5))).status == "published"
    aws.control.put("active", {"pk": "active", "version": 1, "spec_key": spec_key(1), "stream_name": "s",
                               "flipped_at": "2026-01-01T00:00:00Z"})
    out = process_snapshot(d, write_test_snapshot(aws, snapshot_rows(CELLS), t(10)))
    # WHEN the handler records the outcome and the spec age (EMF metrics flushed to stdout)
    partitioner_handler.record_outcome(out)
    age = partitioner_handler.record_spec_age(aws.control, datetime(2026, 1, 1, 0, 1, tzinfo=UTC))
    partitioner_handler.metrics.flush_metrics()
    emitted = capsys.readouterr().out
    # THEN WorkerUtilisation and SpecAgeSeconds (60 s) are in the namespace the alarms watch
    assert age == 60.0
    assert '"WorkerUtilisation"' in emitted and '"SpecAgeSeconds"' in emitted and "GeoRebalancer" in emitted


def test_bad_policy_json_is_named() -> None:
    # GIVEN a POLICY_JSON with an unknown key / WHEN loaded / THEN the error names the variable and key
    with pytest.raises(ConfigError, match=r"POLICY_JSON.*'hgh_watermark'"):
        load_policy('{"hgh_watermark": 0.9}')


def state_bytes(aws: Aws) -> bytes | None:
    return ObjectStore(aws.clients.s3, aws.cfg.specs_bucket).read(CONTROL_STATE_KEY)


def test_controller_state_is_saved_per_window_and_untouched_by_rejections_and_duplicates(aws: Aws) -> None:
    # GIVEN two processed windows
    d = deps(aws)
    first = write_test_snapshot(aws, snapshot_rows(CELLS), t(5))
    assert process_snapshot(d, first).status == "published"
    assert process_snapshot(d, write_test_snapshot(aws, snapshot_rows(CELLS), t(10))).status in ("held", "published")
    saved = state_bytes(aws)
    # THEN the state in S3 holds both windows' load history and the publish time
    state = ControlState.from_bytes(saved or b"")
    assert state.history is not None and len(state.history) == 2 and state.last_published_at is not None
    assert state.history.totals.sum() == pytest.approx(2 * sum(CELLS.values()))
    # WHEN a bad snapshot (tampered checksum) and a duplicate arrive
    bad = write_test_snapshot(aws, snapshot_rows(CELLS), t(15))
    rewrite_manifest(aws, bad, checksum="0" * 64)
    assert process_snapshot(d, bad).code == "checksum_mismatch"
    assert process_snapshot(d, write_test_snapshot(aws, snapshot_rows(CELLS), t(10))).status == "duplicate"
    # THEN the state is byte for byte what it was
    assert state_bytes(aws) == saved


def test_an_unreadable_state_starts_afresh_and_says_so(aws: Aws) -> None:
    aws.clients.s3.put_object(Bucket=aws.cfg.specs_bucket, Key=CONTROL_STATE_KEY, Body=b"{half a state")
    out = process_snapshot(deps(aws), write_test_snapshot(aws, snapshot_rows(CELLS), t(5)))
    assert out.status == "published" and "controller state unreadable, started afresh" in out.reason
    assert ControlState.from_bytes(state_bytes(aws) or b"").history is not None


def test_the_measured_latency_sets_the_forecast_horizon(aws: Aws) -> None:
    # GIVEN flips that took 20 minutes from snapshot to live
    aws.control.put("latency", {"samples": [{"version": v, "snapshot_end": "x", "live_at": "y", "latency_s": 1200.0}
                                            for v in (1, 2, 3)]})
    # WHEN a window is processed
    process_snapshot(deps(aws), write_test_snapshot(aws, snapshot_rows(CELLS), t(5)))
    # THEN the decision forecast for 20 minutes + one 5-minute window ahead
    policy = aws.control.get("policy")
    assert policy is not None and policy["last_decision"]["details"]["horizon_s"] == 1200 + 300


def test_the_reactive_policy_stays_selectable(aws: Aws) -> None:
    d = deps(aws, policy=load_policy('{"mode": "reactive"}'))
    assert process_snapshot(d, write_test_snapshot(aws, snapshot_rows(CELLS), t(5))).status == "published"
    out = process_snapshot(d, write_test_snapshot(aws, snapshot_rows(CELLS), t(10)))
    assert out.status == "held" and out.decision_reasons[0].startswith("kept: max utilisation")
