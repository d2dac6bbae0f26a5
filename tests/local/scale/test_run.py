"""local.scale: the scale simulation at a small size, end to end: both swaps complete, no event lost, every AWS call
counted and within half its quota. (The sizes that show linear growth run in bench/bench_scale.py.)"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from geokernel.aws_budget.report import MIN_MARGIN
from local.scale.run import state_breaks

REPO = Path(__file__).resolve().parents[3]


def _bench_scale() -> Any:
    """bench/bench_scale.py as a module (bench/ is scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("bench_scale", REPO / "bench" / "bench_scale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_a_small_fleet_swaps_twice_within_every_quota_and_the_state_follows_every_entity(tmp_path: Path) -> None:
    # GIVEN 6 light workers on the worker's own code, 120 events/s routed and all of them sent (every router
    # invocation puts its records, so every slot receives records continuously), on a simulated clock, with state
    # handoff: the router numbers each ingest shard's events through its ledger in S3, the workers run a stateful
    # transform that counts each entity's events, entities keep their home cells (one run covers both: the gate's
    # time; the stateless router's sends differ only in not stamping)
    proc = subprocess.run([sys.executable, "-m", "local.scale", "--workers", "6", "--events-per-s", "120",
                           "--sent-per-worker-s", "20", "--steady", "30", "--leases-warm-writes", "6000",
                           "--leases-warm-reads", "20000", "--stateful", "--out", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    # WHEN the fleet starts, moves 5 % of its load and grows by 20 %
    result = json.loads((tmp_path / "result.json").read_text())
    tail = proc.stdout[-4000:] + proc.stderr[-2000:]
    # THEN every phase completed and every event put on a geo stream came out
    assert [(p["name"], p["ok"]) for p in result["phases"]] == [
        ("deploy v1 (fleet start)", True), ("steady", True), ("swap v2 (load moves)", True),
        ("swap v3 (more workers)", True), ("drain and flush", True)], tail
    assert result["events_sent"] > 0 and result["events_missing"] == 0, tail
    assert result["slots"][2] > result["slots"][1]  # v3 grows
    # AND every entity's counts in the output are 1, 2, ... n, for entities that changed slot in the swaps too
    drain = result["phases"][-1]["detail"]
    assert "the state followed all" in drain and " 0 of them changed slot" not in drain, drain
    # AND the state handoff's calls (ledger GETs and PUTs, state objects) are part of the steady phase's calls
    total, state = result["steady_calls"]
    assert 0 < state < total and "state handoff on" in proc.stdout, tail
    # AND in steady state each slot writes one output object per OUTPUT_FLUSH_S (10 s): 0.1 PUT/s, not one a batch
    puts = result["steady_output_puts"]
    assert puts is not None and 0.05 <= puts <= 0.1 / 0.95, tail
    # AND every API with a documented quota stayed at or below half of it, and the run says so
    rows = {r["key"]: r for r in result["budget"]}
    assert all(r["margin"] is None or r["margin"] >= MIN_MARGIN for r in rows.values()), rows
    assert proc.returncode == 0 and result["ok"], tail
    # AND the calls the review found growing with the fleet are gone from the workers: the shard list is read once
    # per geo stream (the deployer's manifest), not by every worker; DescribeStreamSummary is the deployer's alone
    assert rows["kinesis.ListShards"]["total"] == 3
    assert rows["kinesis.DescribeStreamSummary"]["sustained"] < 1.0
    assert "AWS API budget at 6 workers" in proc.stdout
    # AND with the stack's leases_warm_writes the leases table's writes are held against it, the control table's
    # against a new table's 4,000 (the row shows the table of least margin)
    writes = rows["dynamodb.write_units.table"]
    quota = 6000 if writes["scope"].endswith("-leases") else 4000
    assert result["config"]["leases_warm_writes"] == 6000 and writes["margin"] == pytest.approx(quota / writes["peak"])
    # AND the same for the reads with leases_warm_reads (a new table's 12,000 for the control table)
    reads = rows["dynamodb.read_units.table"]
    quota = 20000 if reads["scope"].endswith("-leases") else 12000
    assert result["config"]["leases_warm_reads"] == 20000 and reads["margin"] == pytest.approx(quota / reads["peak"])
    # AND the benchmark's per-phase rates (bench/bench_scale.py --results) account for the calls inside each phase:
    # the phases' calls together are at most the run's, and the steady phase's calls per second are the run's own
    per_phase = _bench_scale().load_run(tmp_path)[1]
    assert set(per_phase) == {"steady", "swap v2", "swap v3"}
    spans = {n: next(p["end"] - p["start"] for p in result["phases"] if p["name"].startswith(n)) for n in per_phase}
    for key, rate in result["rates"].items():
        inside = sum(per_phase[n].get(key, 0.0) * spans[n] for n in per_phase)
        assert inside <= rate * result["sim_s"] + 1e-6, key
    assert sum(per_phase["steady"].values()) > 0


def test_state_breaks_names_entities_whose_counts_are_not_one_to_n() -> None:
    # GIVEN output records of CountingState: car-1 counted 1, 2, 3 (event 2 written twice, alike), car-2 counted
    # 1, 1 (its state was lost on a move), car-3 counted 1 and a copy of it 2 (applied twice)
    records: dict[str, list[dict[str, object]]] = {
        "a": [{"entity_id": "car-1", "seen": 1}], "b": [{"entity_id": "car-1", "seen": 2}] * 2,
        "c": [{"entity_id": "car-1", "seen": 3}],
        "d": [{"entity_id": "car-2", "seen": 1}], "e": [{"entity_id": "car-2", "seen": 1}],
        "f": [{"entity_id": "car-3", "seen": 1}, {"entity_id": "car-3", "seen": 2}],
    }
    # WHEN the run checks them
    # THEN the two broken entities are named
    assert state_breaks(records) == ["car-2", "car-3"]
