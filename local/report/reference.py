"""The report's ORACLE section and invariant: the fleet's records against a single-process run (:mod:`local.oracle`).

:func:`oracle_of` runs :func:`local.oracle.run_oracle` over what the replay sent and what the workers wrote;
:func:`section` lays out its counts and first differences; :func:`check` is the invariant (any difference fails
the run). A stateful transform is expected to fail it until entity state follows an entity across workers: the
section says so.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from local.oracle import OracleResult, run_oracle
from local.state import RunState

NAME = "every record's fields equal a single-process reference run of the transform (local/oracle.py)"


def oracle_of(state: RunState) -> OracleResult:
    """Run the oracle over this run's sent events and enriched records."""
    sent = state.replayer.sent_events if state.replayer else []
    records = state.output.enriched if state.output else []
    return run_oracle(state.config.transform, sent, records)


def section(result: OracleResult | None, error: str | None) -> list[str]:
    """The ORACLE section: the summary line, the first differences, and what a stateful failure means."""
    if result is None:
        return ["ORACLE", f"  the reference run failed: {error}"]
    lines = ["ORACLE (a single process runs the transform over every sent event in send order; local/oracle.py)",
             f"  {result.line()}", f"  {result.filled_line()}"]
    lines += [f"  e.g. event {d.event_id!r} entity {d.entity!r} field {d.field!r}: expected {d.expected!r}, "
              f"got {d.got!r}" for d in result.examples]
    lines += [f"  out of send order: {e}" for e in result.order_examples]
    if result.stateful and not result.ok:
        lines.append("  a stateful transform's state follows each entity (geo_service/entity/handoff.py): a difference means "
                     "a state was not handed over in order (see STATE HANDOFF and the workers' state_not_handed_over)")
    return lines


def check(result: OracleResult | None, error: str | None) -> tuple[str, bool, str]:
    """The invariant: the reference run ran and found no difference."""
    if result is None:
        return NAME, False, f"the reference run failed: {error}"
    return NAME, result.ok, result.line()


def to_json(result: OracleResult | None, error: str | None) -> dict[str, Any]:
    """``report.json`` ``oracle``: the counts and examples (or the error)."""
    if result is None:
        return {"error": error}
    return {**asdict(result), "ok": result.ok, "examples": [asdict(d) for d in result.examples]}
