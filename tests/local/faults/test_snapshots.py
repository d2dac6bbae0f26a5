"""local.faults.snapshots: corrupt, duplicate and out-of-order snapshots against the real partitioner."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lambdas.partitioner.logic import PartitionerDeps, process_snapshot
from lambdas.runtime.records import read_desired
from local.faults.snapshots import (
    KINDS,
    SnapshotCorrupt,
    SnapshotDup,
    corrupt_snapshots,
    snapshot_window_ends,
    spec_order_problems,
)
from tests.lambdas.conftest import Aws, aws, moto_module, snapshot_rows, t, write_test_snapshot  # noqa: F401

CELLS = {(0, 0): 400, (1, 0): 300, (8, 8): 700, (9, 8): 200, (20, 3): 50}


class S3Store:
    """The snapshots bucket of the moto account as a ``Store``."""

    def __init__(self, aws: Aws) -> None:  # noqa: F811
        self.s3, self.bucket = aws.clients.s3, aws.cfg.snapshots_bucket

    def get(self, key: str) -> bytes | None:
        return bytes(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())

    def put(self, key: str, body: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=body)

    def manifests(self) -> list[str]:
        resp = self.s3.list_objects_v2(Bucket=self.bucket, Prefix="snapshots/")
        return sorted(o["Key"] for o in resp.get("Contents", []) if o["Key"].endswith("/_manifest.json"))


def result(status: str, reason: str = "") -> dict[str, Any]:
    return {"results": [{"status": status, "reason": reason}]}


def test_each_corrupt_snapshot_is_rejected_by_the_partitioner_in_one_line_naming_it(aws: Aws) -> None:  # noqa: F811
    # GIVEN a live spec v1 from a real snapshot
    good = write_test_snapshot(aws, snapshot_rows(CELLS), t(5))
    deps = PartitionerDeps.from_config(aws.cfg, aws.clients)
    assert process_snapshot(deps, good).status == "published"
    # WHEN the fault writes its three bad snapshots (window moved later than the live one)
    store = S3Store(aws)
    kinds = corrupt_snapshots(store, good, t(6))
    assert sorted(kinds.values()) == sorted(KINDS)
    # THEN the real partitioner rejects each with one line naming the object, with the expected reason
    codes, reasons = {}, {}
    for key, kind in kinds.items():
        out = process_snapshot(deps, key)
        assert out.status == "rejected", (kind, out)
        assert "\n" not in out.reason and key.rsplit("/", 1)[0] in out.reason, out.reason
        codes[kind], reasons[kind] = out.code, out.reason
    assert codes == {"truncated": "checksum_mismatch", "not-a-snapshot": "malformed_manifest", "bad-rows": "bad_rows"}
    assert "7'" in reasons["bad-rows"]  # the bad value: a quadkey ending in a digit no quadkey has
    # AND the live spec stays, and the next good snapshot is still judged (not stale behind a corrupt one)
    desired = read_desired(aws.control)
    assert desired is not None and desired.version == 1
    later = write_test_snapshot(aws, snapshot_rows(CELLS), t(10))
    assert process_snapshot(deps, later).status in ("published", "held")


@dataclass
class Call:
    key: str
    at: float
    result: Any
    error: str | None = None


class Dict:
    """An in-memory ``Store``."""

    def __init__(self, keys: list[str]) -> None:
        self.objects = {k: b"" for k in keys}

    def get(self, key: str) -> bytes | None:
        return self.objects.get(key)

    def put(self, key: str, body: bytes) -> None:
        self.objects[key] = body

    def manifests(self) -> list[str]:
        return sorted(self.objects)


W = "snapshots/window_end=2026-11-21T10-00-{:02d}Z/_manifest.json"


def corrupt_fault(calls: list[Call], desired_after: dict[str, int | None]) -> SnapshotCorrupt:
    fault = SnapshotCorrupt(Dict([W.format(10)]), lambda: calls, desired_after, lambda: 0.0,
                            delay_s=0.0, deadline_s=60.0, clock=lambda: 100.0)
    fault.poll()  # the injection is tested against moto above; here only its bookkeeping
    return fault


def test_corrupt_fault_is_detected_on_rejection_and_recovered_on_the_next_judged_snapshot(monkeypatch: Any) -> None:
    kinds = {"snapshots/fault-truncated-x/_manifest.json": "truncated",
             "snapshots/fault-not-a-snapshot-x/_manifest.json": "not-a-snapshot",
             "snapshots/fault-bad-rows-x/_manifest.json": "bad-rows"}
    monkeypatch.setattr("local.faults.snapshots.corrupt_snapshots", lambda *a: dict(kinds))
    calls: list[Call] = [Call(W.format(10), 90.0, result("published"))]
    desired_after: dict[str, int | None] = {W.format(10): 1}
    fault = corrupt_fault(calls, desired_after)
    assert fault.record.injected_at == 100.0
    # WHEN the three were rejected, each naming its object THEN detected, not yet recovered
    for i, key in enumerate(kinds):
        calls.append(Call(key, 101.0 + i, result("rejected", f"bad_rows: {key.rsplit('/', 1)[0]}: row 2")))
        desired_after[key] = 1
    fault.poll()
    assert fault.record.detected_at == 103.0 and not fault.record.recovered and not fault.record.problems
    # WHEN the next good snapshot is held by the policy THEN recovered
    calls.append(Call(W.format(20), 110.0, result("held")))
    fault.poll()
    assert fault.record.recovered and fault.record.within_deadline


def test_a_corrupt_snapshot_that_is_published_breaks_the_run(monkeypatch: Any) -> None:
    kinds = {"snapshots/fault-bad-rows-x/_manifest.json": "bad-rows"}
    monkeypatch.setattr("local.faults.snapshots.corrupt_snapshots", lambda *a: dict(kinds))
    calls = [Call(W.format(10), 90.0, result("published"))]
    desired_after: dict[str, int | None] = {W.format(10): 1}
    fault = corrupt_fault(calls, desired_after)
    calls.append(Call(next(iter(kinds)), 101.0, result("published")))
    desired_after[next(iter(kinds))] = 2
    fault.poll()
    assert any("not rejected" in p for p in fault.record.problems)
    assert any("desired spec moved" in p for p in fault.record.problems)


def test_dup_fault_redelivers_the_same_event_and_an_older_window_after_a_newer_one() -> None:
    # GIVEN windows up to :20 written and :10, :20 judged
    store = Dict([W.format(10), W.format(20)])
    calls = [Call(W.format(10), 90.0, result("published")), Call(W.format(20), 95.0, result("held"))]
    held: set[str] = set()
    answers = {W.format(20): result("duplicate", "duplicate: already processed"),
               W.format(40): result("rejected", "stale_snapshot: window_end is not after")}
    delivered: list[str] = []

    def deliver(key: str) -> Any:
        delivered.append(key)
        return answers[key]

    now = [100.0]
    mark = ["2026-11-21T10:00:20Z"]
    fault = SnapshotDup(store, lambda: calls, held.add, deliver, lambda: mark[0], lambda: 0.0, window_s=10.0,
                        delay_s=0.0, deadline_s=90.0, clock=lambda: now[0])
    fault.poll()
    # THEN the window two ahead of the newest (:40) is held back before it exists
    assert held == {W.format(40)} and fault.record.injected_at == 100.0
    fault.poll()
    assert delivered == [W.format(20)]  # the same S3 event a second time
    # WHEN :40 was written and :50 judged (the mark moved to :50) THEN :40 is delivered late and rejected as stale:
    # detected, and recovered at once because the partitioner's mark still names :50
    store.put(W.format(40), b"")
    calls.append(Call(W.format(50), 130.0, result("published")))
    mark[0] = "2026-11-21T10:00:50Z"
    now[0] = 131.0
    fault.poll()
    assert delivered == [W.format(20), W.format(40)] and fault.record.detected_at == 131.0
    assert not fault.record.problems
    assert fault.record.recovered_at == 131.0 and fault.record.within_deadline
    assert "mark still at 2026-11-21T10:00:50Z" in fault.record.did


def test_dup_fault_reports_a_late_delivery_that_moved_the_mark_back() -> None:
    # GIVEN the dup fault past its duplicate, :40 held back, :50 judged
    store = Dict([W.format(10), W.format(20)])
    calls = [Call(W.format(20), 95.0, result("held"))]
    answers = {W.format(20): result("duplicate", "duplicate"), W.format(40): result("rejected", "stale_snapshot: x")}
    fault = SnapshotDup(store, lambda: calls, lambda k: None, answers.__getitem__, lambda: "2026-11-21T10:00:40Z",
                        lambda: 0.0, window_s=10.0, delay_s=0.0, deadline_s=90.0, clock=lambda: 100.0)
    fault.poll()
    fault.poll()
    store.put(W.format(40), b"")
    calls.append(Call(W.format(50), 98.0, result("published")))
    # WHEN the late delivery left the mark at the held window :40 (a partitioner that recorded the stale one)
    fault.poll()
    # THEN the fault is detected, not recovered, and the broken promise names the mark
    assert fault.record.detected_at is not None and not fault.record.recovered
    assert any("snapshot mark is '2026-11-21T10:00:40Z'" in p for p in fault.record.problems)


def test_dup_fault_reports_a_duplicate_that_published() -> None:
    store = Dict([W.format(10)])
    calls = [Call(W.format(10), 90.0, result("published"))]
    fault = SnapshotDup(store, lambda: calls, lambda k: None, lambda k: result("published"), lambda: "", lambda: 0.0,
                        window_s=10.0, delay_s=0.0, deadline_s=90.0, clock=lambda: 100.0)
    fault.poll()
    fault.poll()
    assert fault.record.problems and "expected duplicate" in fault.record.problems[0]


def test_spec_order_problems_names_a_spec_published_twice_or_backwards() -> None:
    assert spec_order_problems({1: "2026-01-01T00:00:10Z", 2: "2026-01-01T00:00:20Z"}) == []
    (twice,) = spec_order_problems({1: "2026-01-01T00:00:10Z", 2: "2026-01-01T00:00:10Z"})
    assert "v2" in twice and "2026-01-01T00:00:10Z" in twice
    assert len(spec_order_problems({3: "2026-01-01T00:00:30Z", 4: "2026-01-01T00:00:20Z"})) == 1




def test_a_fast_path_relief_names_no_window_and_is_not_judged_for_order() -> None:
    # GIVEN window specs v4 and v7 around two reliefs of the fast path (built from surge signals: no window_end)
    sources = {4: {"window_end": "2026-01-01T00:00:40Z"}, 5: {"relief": {"signal": "a"}},
               6: {"relief": {"signal": "b"}, "fill": 0.8}, 7: {"window_end": "2026-01-01T00:00:50Z"}}
    # WHEN the specs' windows are taken for the order check
    ends = snapshot_window_ends(sources)
    # THEN only the window specs are judged, and in order they pass
    assert ends == {4: "2026-01-01T00:00:40Z", 7: "2026-01-01T00:00:50Z"}
    assert spec_order_problems(ends) == []
    # AND a window spec without its window is still named
    assert len(spec_order_problems(snapshot_window_ends({**sources, 8: {}}))) == 1
