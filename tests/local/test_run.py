"""End to end: ``python -m local.run --quick`` runs the whole loop and its report holds.

Real everything: moto server, Spark local mode, the real handlers and worker processes. It takes
about two minutes on a 2-core machine, so it is marked ``slow`` and ``spark``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path, float]:
    out = tmp_path_factory.mktemp("local-run")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "local.run", "--quick", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=420)
    return proc, out, time.monotonic() - started


def test_quick_run_passes_every_invariant(quick_run: tuple[subprocess.CompletedProcess[str], Path, float]) -> None:
    # GIVEN a quick local run WHEN it finishes
    proc, out, _ = quick_run
    report = json.loads((out / "report.json").read_text())
    failed = [c for c in report["invariants"] if not c["ok"]]
    # THEN it exits 0 and every invariant passed
    assert proc.returncode == 0, f"exit {proc.returncode}; failed: {failed}\n{proc.stdout[-4000:]}\n{proc.stderr[-3000:]}"
    assert not failed and report["ok"] is True


def test_quick_run_delivers_every_event_once_after_dedupe(
        quick_run: tuple[subprocess.CompletedProcess[str], Path, float]) -> None:
    # GIVEN the quick run's report WHEN events in and out are compared
    _, out, _ = quick_run
    d = json.loads((out / "report.json").read_text())["delivery"]
    # THEN every valid event came out, none lost, none invented
    assert d["sent"] > 1000
    assert d["lost"] == 0 and d["unexpected"] == 0 and d["out_unique"] == d["sent"]


def test_quick_run_deploys_flips_and_quarantines(
        quick_run: tuple[subprocess.CompletedProcess[str], Path, float]) -> None:
    # GIVEN the quick run's report
    _, out, _ = quick_run
    report = json.loads((out / "report.json").read_text())
    # THEN at least one blue/green flip happened, each with green ready no later than the flip
    assert report["flips"], "no flip at all"
    for flip in report["flips"]:
        assert flip["green_ready_at"] is not None and flip["flipped_at"] is not None
    # AND every injected bad event was quarantined with its reason code
    quarantined = report["quarantine"]["by_reason"]
    for reason, n in report["bad_injected"].items():
        assert quarantined.get(reason, 0) >= n, f"{reason}: injected {n}, quarantined {quarantined}"


def test_quick_run_writes_report_files(quick_run: tuple[subprocess.CompletedProcess[str], Path, float]) -> None:
    # GIVEN the quick run's output folder
    proc, out, _ = quick_run
    # THEN it holds the text report, the utilisation figure and each published spec as JSON and GeoJSON
    assert "INVARIANTS" in (out / "report.txt").read_text() and "RESULT: OK" in proc.stdout
    assert (out / "utilisation.png").stat().st_size > 10_000
    specs = sorted((out / "specs").glob("v*.json"))
    assert specs, "no spec written"
    for spec in specs:
        geo = json.loads(spec.with_suffix(".geojson").read_text())
        assert geo["type"] == "FeatureCollection" and geo["features"]


def test_quick_run_takes_about_two_minutes(quick_run: tuple[subprocess.CompletedProcess[str], Path, float]) -> None:
    # GIVEN the quick run THEN it finished within the suite's budget (about 2 minutes idle; slack for a busy machine)
    _, _, wall = quick_run
    assert wall < 300, f"quick run took {wall:.0f}s"
