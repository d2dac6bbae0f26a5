"""local.faults.arm and local.faults.follow: a short ``--faults all`` run of the whole loop, in both swap modes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from local.fault_names import FAULTS, WHOLE_ONLY

REPO = Path(__file__).resolve().parents[3]

#: The run's invariants a fault must never break (local/report/invariants.py names them); the utilisation-at-the-workers
#: invariant is left to tests/local/test_run.py: a fault-free quick run. With faults a Spark outage delays
#: rebalancing by its restart time, and on a loaded 2-core machine the quick run's few full worker-windows vary.
FAULT_INVARIANTS = ("no event lost or invented", "never two owners of one lease", "no flip before green was ready",
                    "the router never pointed at a version with no running worker",
                    "never two readers of one cell at once", "per-entity order kept across every flip",
                    "the router flips each entity once")


#: What each run injects. Carry mode (the default) gets ``all``. Whole mode gets the faults whose path depends on
#: the swap mode: the lifecycle hook faults, a worker or the deployer dying mid-swap, throttled geo streams. The
#: Spark and snapshot faults act upstream of every swap (the same job, partitioner and specs in both modes), so
#: they run once; a second spark-kill cost the gate about two minutes of waiting for Spark's restart.
RUN_FAULTS = {"carry": tuple(f for f in FAULTS if f not in WHOLE_ONLY),
              "whole": ("worker-kill", "deployer-crash", "stream-throttle", *WHOLE_ONLY)}


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("mode", ["carry", "whole"])
def test_quick_run_with_all_faults_recovers_without_losing_an_event(tmp_path: Path, mode: str) -> None:
    # GIVEN the whole loop (moto, Spark, real workers) WHEN run short with every fault of the swap mode injected
    # (whole mode adds the lifecycle hook faults)
    faults = "all" if mode == "carry" else ",".join(RUN_FAULTS[mode])
    proc = subprocess.run([sys.executable, "-m", "local.run", "--quick", "--swap-mode", mode, "--faults", faults,
                           "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=900)
    tail = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.returncode in (0, 1), tail  # 2 = bad arguments, 3 = a component missing
    # THEN every fault was injected and recovered in time
    records = json.loads((tmp_path / "faults.json").read_text())
    assert [f["fault"] for f in records] == [f for f in FAULTS if f in RUN_FAULTS[mode]]
    said = "\n".join(line for line in proc.stdout.splitlines() if "[FAIL]" in line or "tail timeout" in line)
    for f in records:
        assert f["injected_at"] is not None and f["recovered"] and f["within_deadline"], (f, said)
        assert not f["problems"], f  # e.g. a corrupt snapshot not rejected, a duplicate that published
    assert "fault table" in proc.stdout
    # AND no event was lost, no lease had two owners, no flip came early, the components ran to the end
    report = json.loads((tmp_path / "report.json").read_text())
    checked = {i["name"].split(" (")[0].split(":")[0]: i for i in report["invariants"]}
    story = timeline(proc.stdout)  # what CI shows of a failure: the run's own account of its swaps and its tail
    for name in FAULT_INVARIANTS:
        (inv,) = [i for k, i in checked.items() if k.startswith(name)]
        assert inv["ok"], (inv, story)
    (ran,) = [i for k, i in checked.items() if k.startswith("components ran to the end")]
    assert ran["ok"], (ran, story)


def timeline(stdout: str) -> str:
    """The run's lines that tell where an event could have gone: faults, deploys, flips, the replay's end, the tail,
    routing problems and failed checks."""
    marks = ("FAULT ", "deploy v", "flip", "replay done", "tail timeout", "all events out", "[FAIL]", "discarded",
             "did not drain", "routing problem")
    return "\n".join(line[:300] for line in stdout.splitlines() if any(m in line for m in marks))
