"""End to end: ``python -m local.run --quick`` runs the whole loop and its report holds.

Real everything: moto server, Spark local mode, the real handlers and worker processes. It takes
about two to five minutes on a 2-core machine (its wall time is the run's own, not a test: bench and the
closing note time ``./scripts/run-local``), so it is marked ``slow`` and ``spark``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("local-run")
    proc = subprocess.run([sys.executable, "-m", "local.run", "--quick", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=420)
    return proc, out


def test_quick_run_passes_every_invariant(quick_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    # GIVEN a quick local run WHEN it finishes
    proc, out = quick_run
    report = json.loads((out / "report.json").read_text())
    failed = [c for c in report["invariants"] if not c["ok"]]
    # THEN it exits 0 and every invariant passed
    assert proc.returncode == 0, f"exit {proc.returncode}; failed: {failed}\n{proc.stdout[-4000:]}\n{proc.stderr[-3000:]}"
    assert not failed and report["ok"] is True


def test_quick_run_report_leads_with_utilisation_at_the_workers(
        quick_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    # GIVEN the quick run's report
    _, out = quick_run
    text = (out / "report.txt").read_text()
    u = json.loads((out / "report.json").read_text())["utilisation"]
    # THEN its first section is the utilisation measured at the workers, the snapshot's view comes later, labelled
    first = text.split("=" * 100)[2].strip().splitlines()[0]
    assert first.startswith("UTILISATION AT THE WORKERS"), first
    assert text.index("THE SNAPSHOT'S ESTIMATE") > text.index("UTILISATION AT THE WORKERS")
    # AND report.json holds per-worker counts per window, measured over enough worker-windows, on the target
    assert u["cap"] > 0 and u["worker_windows"] >= 10
    assert all(len(v) == len(u["window_starts"]) for v in u["events"].values())
    cells = [n for v in u["events"].values() for n in v if n > 0]
    assert len(cells) <= u["worker_windows"] and max(cells) <= 1.1 * u["cap"]
    assert u["over_cap_share"] <= 0.02
    # AND every worker that processed events has measured CPU from its cost reports
    assert all(sum(v) > 0 for v in u["cpu_s"].values())


def test_quick_run_delivers_every_event_once_after_dedupe(
        quick_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    # GIVEN the quick run's report WHEN events in and out are compared
    _, out = quick_run
    d = json.loads((out / "report.json").read_text())["delivery"]
    # THEN every valid event came out, none lost, none invented
    assert d["sent"] > 1000
    assert d["lost"] == 0 and d["unexpected"] == 0 and d["out_unique"] == d["sent"]


def test_quick_run_deploys_flips_and_quarantines(
        quick_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    # GIVEN the quick run's report
    _, out = quick_run
    report = json.loads((out / "report.json").read_text())
    # THEN at least one blue/green flip happened, each with green ready no later than the flip
    assert report["flips"], "no flip at all"
    for flip in report["flips"]:
        assert flip["green_ready_at"] is not None and flip["flipped_at"] is not None
        # AND the loop's snapshot-to-live latency was measured: a flip built from a snapshot window came after the
        # window closed; a relief of the surge fast path (the replay's own hotspot can trip it) has no window
        if flip["built_from"] == "window":
            assert flip["window_end"] is not None and 0 < flip["window_to_flip_s"] < 300
        else:
            assert flip["built_from"] == "relief" and flip["window_end"] is None
    assert any(f["built_from"] == "window" for f in report["flips"])
    # AND every injected bad event was quarantined with its reason code
    quarantined = report["quarantine"]["by_reason"]
    for reason, n in report["bad_injected"].items():
        assert quarantined.get(reason, 0) >= n, f"{reason}: injected {n}, quarantined {quarantined}"


def test_quick_run_writes_report_files(quick_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    # GIVEN the quick run's output folder
    proc, out = quick_run
    # THEN it holds the text report, the utilisation figure and each published spec as JSON and GeoJSON
    assert "INVARIANTS" in (out / "report.txt").read_text() and "RESULT: OK" in proc.stdout
    assert (out / "utilisation.png").stat().st_size > 10_000
    specs = sorted((out / "specs").glob("v*.json"))
    assert specs, "no spec written"
    for spec in specs:
        geo = json.loads(spec.with_suffix(".geojson").read_text())
        assert geo["type"] == "FeatureCollection" and geo["features"]



def test_quick_run_is_wired_from_the_stack_and_runs_every_part_as_its_role(
        quick_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    # GIVEN the quick run's report
    _, out = quick_run
    iam = json.loads((out / "report.json").read_text())["iam"]
    # THEN the twin read a synthesized template, held the calls of every part against that part's role, and
    # refused none (a missing grant fails the run the way it would fail the first deploy)
    assert Path(iam["template"]).name.endswith(".template.json")
    assert {"router", "partitioner", "deployer", "worker", "spark"} <= set(iam["checked"])
    assert all(n > 0 for n in iam["checked"].values()) and iam["denied"] == []


def test_quick_run_sends_from_time_zero_and_loses_nothing_sent_before_the_first_spec(
        quick_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    # GIVEN the quick run's report: the replay starts sending before any snapshot or spec exists
    _, out = quick_run
    report = json.loads((out / "report.json").read_text())
    early = report["before_first_spec"]
    # THEN events were sent before the first spec was active, and every one of them came out once it was (the stack's
    # event source reads from TRIM_HORIZON and holds failed records by age; on the old stack's LATEST and 10 retries
    # the twin lost them: tests/local/test_event_source.py)
    assert early["sent"] > 100 and early["live_after_s"] > 5
    assert early["came_out"] == early["sent"]


def test_quick_run_keeps_its_output_and_a_query_of_each_hour_gives_the_oracles_count(
        quick_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    # GIVEN the quick run's output folder and report
    proc, out = quick_run
    report = json.loads((out / "report.json").read_text())
    product = report["data_product"]
    # THEN the enriched output and the snapshots are kept as a deployment's buckets lay them out
    kept = {k["role"]: k for k in product["kept"]}
    assert kept["output"]["objects"] > 0 and kept["snapshots"]["objects"] > 0
    assert any((out / "s3/output/enriched").glob("dt=*/hour=*/v*-*-*-*.jsonl.gz"))
    assert any((out / "s3/snapshots/snapshots").glob("window_end=*/_manifest.json"))
    # AND pyarrow, reading each hour's folder alone, finds every event of the hour once: the oracle's count
    hours = product["hours"]
    assert hours and product["ok"] and all(h["events"] == h["oracle"] > 0 for h in hours), hours
    assert sum(h["events"] for h in hours) == report["delivery"]["out_unique"]
    assert sum(h["oracle"] for h in hours) == report["oracle"]["compared"] + report["oracle"]["missing"]
    assert sum(h["records"] for h in hours) == report["delivery"]["out_records"]
    # AND the report says so in its closing lines
    assert "OUTPUT AS A DATA PRODUCT: hour " in proc.stdout and "; the oracle's count " in proc.stdout
