"""The swap section of the local report (local.report.swaps), on hand-made runs."""

from __future__ import annotations

from geokernel.contracts.plan import PlanItem
from geokernel.geo.tiles import quadkey, tile
from geokernel.partition_spec.model import Partition, Spec, Worker, shard_hash_key
from local.fleet import FleetEvent
from local.observe import LeaseTenure
from local.output import Processed
from local.report.swaps import Flip, checks, report_json, report_lines, swaps_report


def plan(mode: str, *, kept: list[str] | None = None, started: list[str] | None = None,
         stopped: list[str] | None = None, moved_cells: int = 0) -> PlanItem:
    """The plan of a swap from v1 to v2, decoded from its control item as the observer does."""
    return PlanItem.from_item({"from_version": 1, "to_version": 2, "mode": mode, "kept": kept or [],
                               "started": started or [], "stopped": stopped or [], "moved_cells": moved_cells,
                               "gains": {}, "status": "done", "updated_at": 0.0})


def _two_slot_specs() -> tuple[Spec, Spec]:
    france, spain = quadkey(tile(2.3522, 48.8566, 5)), quadkey(tile(-3.7038, 40.4168, 5))

    def spec(version: int, first: list[str]) -> Spec:
        workers = tuple(Worker(id=f"w{i + 1:04d}", load=1.0, hash_key=shard_hash_key(i, 2)) for i in range(2))
        parts = (Partition(id="p0001", worker="w0001", quadkeys=tuple(first), load=1.0),
                 Partition(id="p0002", worker="w0002", quadkeys=("",), load=1.0))
        return Spec(version=version, max_load=10.0, partitions=parts, workers=workers,
                    previous_version=version - 1 or None, created_at="2026-11-22T00:00:00Z", strategy="test")

    return spec(1, [france]), spec(2, [france, spain])


def tenure(version: int, worker: str, pid: int, claimed: float, ready: float, serving: float | None = None,
           drained: float | None = None) -> LeaseTenure:
    return LeaseTenure(f"v{version}#{worker}", version, worker, f"h:{pid}:x", claimed, claimed, ready, serving, drained,
                       drained)


def test_swap_rows_count_carried_started_stopped_and_extra_worker_seconds() -> None:
    # GIVEN v1 on processes 11 (w1) and 12 (w2), and a carry swap to v2 at t=100 that keeps w1 (same process),
    # removes w2 (its process drains until 106 and exits at 107) and starts w3 (process 13, started at 90)
    plans = {2: plan("carry", kept=["w1"], started=["w3"], stopped=["w2"], moved_cells=7)}
    tenures = [tenure(1, "w1", 11, 1, 2, 2, 104), tenure(1, "w2", 12, 1, 2.5, 2.5, 106),
               tenure(2, "w1", 11, 95, 95.5, 105), tenure(2, "w3", 13, 92, 94, 105)]
    history = [FleetEvent(0.0, "start", 1, "w1", 11), FleetEvent(0.0, "start", 1, "w2", 12),
               FleetEvent(90.0, "start", 2, "w3", 13), FleetEvent(107.0, "exit", 1, "w2", 12, 0)]
    # WHEN the report is computed
    rep = swaps_report([], [Flip(1, 2, 100.0)], plans, {1: 2, 2: 2}, tenures, history)
    # THEN one row: 1 of 2 slots carried, 1 started, 1 stopped; extra = 10 s before the flip + 7 s after it
    (row,) = rep.rows
    assert (row.kept, row.carried, row.started, row.stopped, row.moved_cells) == (1, 1, 1, 1, 7)
    assert row.carried_share == 0.5 and row.extra_worker_s == 17.0 and row.handover_s == 5.0
    # AND the timings: processes claim 1 s (v1) or 2 s (w3) after starting, warm 1-2 s, the carried slot took 0.5 s
    t = rep.timings
    assert (t.process_start_s, t.carry_prepare_s, t.drain_s, t.handover_s) == (1.0, 0.5, 5.0, 5.0)
    assert t.samples["process_start"] == 3
    # AND the JSON and text forms carry it
    doc = report_json(rep)
    want = {"from": 1, "to": 2, "carried": 1, "started": 1, "stopped": 1, "moved_cells": 7, "extra_worker_s": 17.0}
    assert doc["swaps"][0].items() >= want.items()
    assert doc["median_carried_share"] == 0.5 and any("v1->v2" in line for line in report_lines(rep))


def test_whole_swap_carries_nothing_and_pays_for_both_fleets() -> None:
    # GIVEN a whole swap at t=100: v2's two processes start at 80, v1's two exit at 105
    plans = {2: plan("whole", started=["w1", "w2"], stopped=["w1", "w2"], moved_cells=3)}
    tenures = [tenure(1, "w1", 11, 1, 2, 2, 104), tenure(1, "w2", 12, 1, 2, 2, 104),
               tenure(2, "w1", 21, 82, 85, 104), tenure(2, "w2", 22, 82, 85, 104)]
    history = [FleetEvent(80.0, "start", 2, "w1", 21), FleetEvent(80.0, "start", 2, "w2", 22),
               FleetEvent(105.0, "exit", 1, "w1", 11, 0), FleetEvent(105.0, "exit", 1, "w2", 12, 0)]
    # WHEN computed THEN nothing carried; extra = 2 x 20 s before + 2 x 5 s after the flip
    (row,) = swaps_report([], [Flip(1, 2, 100.0)], plans, {2: 2}, tenures, history).rows
    assert (row.carried, row.started, row.stopped, row.extra_worker_s, row.handover_s) == (0, 2, 2, 50.0, None)


def test_the_carry_share_invariant_applies_to_carry_runs_and_fails_below_80_percent() -> None:
    # GIVEN a run whose swap carried 1 of 2 slots that 2 old processes could carry WHEN checked in carry mode
    plans = {2: plan("carry", kept=["w1"], moved_cells=1)}
    tenures = [tenure(1, "w1", 11, 1, 2), tenure(2, "w1", 11, 95, 96, 105)]
    rep = swaps_report([], [Flip(1, 2, 100.0)], plans, {1: 2, 2: 2}, tenures, [])
    got = {name: ok for name, ok, _ in checks(rep, "carry")}
    # THEN the share invariant fails
    assert got == {"never two readers of one cell at once": True, "per-entity order kept across every flip": True,
                   "the router flips each entity once (nothing put on an older stream after a newer one)": True,
                   "the median swap carries over >= 80% of the slots an old process could carry": False}
    # AND a whole run is not held to it
    assert len(checks(rep, "whole")) == 3
    # AND a grow from 1 to 2 slots that carried the one old slot holds it: the new slot needs a new process
    grow = swaps_report([], [Flip(1, 2, 100.0)], plans, {1: 1, 2: 2}, tenures, [])
    (row,) = grow.rows
    assert (row.carried_share, row.carried_of_carryable) == (0.5, 1.0)
    assert all(ok for _, ok, _ in checks(grow, "carry"))


def test_the_handover_lag_splits_kept_and_moved_cells_of_carried_slots() -> None:
    # GIVEN v1: w1 owns France (z5), w2 the rest; v2 keeps both, w1 gains Spain. A swap at t=100 s where the
    # carried w1 processes a Paris record 0.4 s after it was sent and a Madrid record (moved from w2) 5 s after
    v1, v2 = _two_slot_specs()
    plans = {2: plan("carry", kept=["w0001", "w0002"], moved_cells=1)}
    tenures = [tenure(1, "w0001", 11, 1, 2, 2, 104), tenure(1, "w0002", 12, 1, 2, 2, 104),
               tenure(2, "w0001", 11, 95, 95.5, 100.5), tenure(2, "w0002", 12, 95, 95.5, 100.5)]
    paris = Processed("e1", "car-1", 2, "w0001", "h:11:x", 100_600, "c", 100_200, 2.3522, 48.8566)
    madrid = Processed("e2", "car-2", 2, "w0001", "h:11:x", 106_000, "c", 101_000, -3.7038, 40.4168)
    late = Processed("e3", "car-3", 2, "w0001", "h:11:x", 130_000, "c", 129_900, 2.3522, 48.8566)
    old = Processed("e0", "car-1", 1, "w0001", "h:11:x", 95_000, "c", 94_300, 2.3522, 48.8566)
    # WHEN the report is computed with the specs
    rep = swaps_report([old, paris, madrid, late], [Flip(1, 2, 100.0)], plans, {2: 2}, tenures, [], {1: v1, 2: v2})
    # THEN the kept cell's lag and the moved cell's lag are reported apart (records after the window are left out),
    # beside the carried process's lag before the flip
    (row,) = rep.rows
    assert (row.before_lag_p99_s, row.kept_lag_p99_s, row.moved_lag_p99_s) == (0.7, 0.4, 5.0)
    assert "lag kept" in report_lines(rep)[1]
    # AND without specs the columns stay empty
    (bare,) = swaps_report([paris, madrid], [Flip(1, 2, 100.0)], plans, {2: 2}, tenures, []).rows
    assert (bare.kept_lag_p99_s, bare.moved_lag_p99_s) == (None, None)
