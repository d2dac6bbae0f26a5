"""Following the armed faults while the loop runs, and their table at the end.

:func:`poll_faults` drives every injector (the replay and tail phases call it several times a second) and says
when one fired or broke a promise; :func:`fault_pending` keeps the tail waiting for a fault still open, and
:func:`snapshot_fault_open` keeps its snapshot notifications on while a snapshot fault needs a judged window;
:func:`fault_table` prints the table, writes ``faults.json`` and fails the run when a fault did not recover in time.
"""

from __future__ import annotations

import json
import time

from local.faults.record import events_column
from local.faults.snapshots import snapshot_window_ends, spec_order_problems
from local.output import delivery
from local.state import RunState, say


def poll_faults(state: RunState) -> None:
    """Poll every armed fault; say when one was injected and every promise it broke."""
    for fault in state.faults:
        was = fault.record.injected_at
        fault.poll()
        if was is None and fault.record.injected_at is not None:
            held = f", holding {', '.join(fault.record.leases)}" if fault.record.leases else ""
            done = " killed" if fault.record.fault.endswith(("-kill", "-crash")) else ""
            say(state, f"FAULT {fault.record.fault}: {fault.record.target}{done} "
                       f"({'mid-swap' if fault.record.mid_swap else 'no swap in flight'}){held}")
        if fault.record.problems and len(fault.record.problems) > getattr(fault, "_announced", 0):
            for problem in fault.record.problems[getattr(fault, "_announced", 0):]:
                say(state, f"FAULT {fault.record.fault}: BROKEN: {problem}")
            fault._announced = len(fault.record.problems)


def fault_table(state: RunState) -> None:
    """Print the fault table, write ``faults.json``, and fail the run if a fault did not recover in time."""
    if not state.faults:
        return
    records = [f.record for f in state.faults]
    out = state.output.records if state.output else []
    lost = delivery(state.replayer.sent_ids if state.replayer else [], out).lost
    copies = [(r.event_id, r.written_ms) for r in out]
    for r in records:
        if r.injected_at is not None:
            end = r.recovered_at or time.time()
            r.events = events_column(lost, copies, int(1000 * r.injected_at), int(1000 * end))
    if any(r.fault.startswith("snapshot-") for r in records) and state.observer is not None:
        ends = snapshot_window_ends({v: s.source for v, s in state.observer.specs.items() if s is not None})
        order = spec_order_problems(ends)
        for r in records:
            if r.fault.startswith("snapshot-"):
                r.problems += order
    say(state, "fault table (seconds since the run started):")
    for r in records:
        say(state, "  " + r.row(state.started_at))
    (state.config.out / "faults.json").write_text(json.dumps([r.to_dict() for r in records], indent=2) + "\n")
    bad = [r.fault for r in records if r.injected_at is None or not r.within_deadline]
    broken = [f"{r.fault}: {p}" for r in records for p in r.problems]
    if (bad or broken) and state.failure is None:
        state.failure = "; ".join(
            ([f"fault(s) not injected or not recovered within their deadline: {', '.join(bad)}"] if bad else [])
            + broken) + " (see faults.json)"


def snapshot_fault_open(state: RunState) -> bool:
    """True while an injected ``snapshot-*`` fault has not recovered and its deadline has not passed (the tail keeps
    the snapshot notifications on for it: ``snapshot-corrupt`` recovers only on a window judged after it)."""
    return fault_pending(state, prefix="snapshot-")


def fault_pending(state: RunState, prefix: str = "") -> bool:
    """True while an injected fault (whose name starts with ``prefix``) has not recovered and its deadline has not
    passed (the tail waits for it)."""
    now = time.time()
    return any(f.record.fault.startswith(prefix) and f.record.injected_at is not None and not f.record.recovered
               and now - f.record.injected_at <= f.record.deadline_s for f in state.faults)
