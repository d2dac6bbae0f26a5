"""local.faults.spark_kill: the Spark job killed once a spec is live, restarted, recovered on its next snapshot."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from local.faults.spark_kill import SparkKill


@dataclass
class Job:
    pid: int
    log_path: Path
    dead: bool = False

    def alive(self) -> bool:
        return not self.dead


def test_spark_kill_restarts_the_job_and_recovers_on_its_next_snapshot(tmp_path: Path) -> None:
    # GIVEN a live spec and a job whose log already has a snapshot line (from before the kill)
    log = tmp_path / "spark.log"
    log.write_text("[aggregation] batch=1 snapshot s3://b/snapshots/x/_manifest.json\n")
    now = [0.0]
    jobs = [Job(10, log)]
    killed: list[int] = []

    def restart() -> Job:
        jobs.append(Job(11, log))
        return jobs[-1]

    fault = SparkKill(lambda: jobs[-1], restart, lambda: "done", lambda: 0.0, delay_s=5.0, deadline_s=60.0,
                      kill=killed.append, clock=lambda: now[0])
    fault.poll()
    assert killed == [] and not fault.owns_exit()
    # WHEN the delay passed THEN the job is killed and its exit belongs to the fault (the loop must not fail)
    now[0] = 6.0
    fault.poll()
    assert killed == [10] and fault.owns_exit()
    # WHEN it is gone THEN the fault detects it and restarts the job
    jobs[0].dead = True
    now[0] = 7.0
    fault.poll()
    assert fault.record.detected_at == 7.0 and jobs[-1].pid == 11 and not fault.owns_exit()
    # AND the old snapshot line does not count as recovery; a new one does
    now[0] = 8.0
    fault.poll()
    assert not fault.record.recovered
    with log.open("a") as f:
        f.write("[aggregation] batch=2 snapshot s3://b/snapshots/y/_manifest.json\n")
    now[0] = 40.0
    fault.poll()
    assert fault.record.recovered and fault.record.within_deadline
