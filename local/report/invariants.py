"""The report's INVARIANTS (exit 1 when one breaks) and WHAT THIS RUN SHOWED (what a run is meant to show).

The invariants of the loop itself: delivery, lease safety, flip safety, served, the cap at the workers and the
components (:func:`checks`); the swap invariants are :func:`local.report.swaps.checks`, the AWS budget
:func:`local.calls.section`. See :mod:`local.report` for what each means.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from local.faults.record import FaultRecord
from local.fleet import WorkerSettings
from local.output import delivery
from local.report.surge import RELIEF_TARGET_S, relief_of
from local.report.utilisation import as_percent
from local.report.worker_load import MAX_OVER_CAP_SHARE, MAX_UTILISATION, WorkerLoad
from local.state import RunState

#: the start of the utilisation-at-the-workers check's name (tests pick it out by it)
CAP_CHECK = f"at most {100 * MAX_OVER_CAP_SHARE:g}% of worker-windows over the cap"


@dataclass(frozen=True)
class Check:
    """One invariant: name, whether it held, and the evidence."""

    name: str
    ok: bool
    detail: str


def checks(state: RunState, load: WorkerLoad) -> list[Check]:
    """Evaluate the invariants of the module docstring."""
    out: list[Check] = []
    sent = state.replayer.sent_ids if state.replayer else []
    d = delivery(sent, state.output.records if state.output else [])
    problems = state.output.problems if state.output else []
    out.append(Check("no event lost or invented (after dedupe by event_id)", d.ok and not problems,
                     f"in {d.sent}, out {d.out_unique} unique of {d.out_records} records "
                     f"({d.duplicates} at-least-once duplicates removed), lost {d.lost} {list(d.lost_sample)}, "
                     f"unexpected {d.unexpected} {list(d.unexpected_sample)}, unreadable lines {len(problems)}"))
    obs = state.observer
    lease_v = [v for v in (obs.violations if obs else []) if v.startswith("two owners")]
    out.append(Check("never two owners of one lease", obs is not None and not lease_v,
                     f"{len(obs.owner_changes) if obs else 0} owner changes seen; " + ("; ".join(lease_v) or "ok")))
    flip_v = [v for v in (obs.violations if obs else []) if v.startswith("flip")]
    out.append(Check("no flip before green was ready", obs is not None and not flip_v,
                     f"{len(obs.flips) if obs else 0} flips; " + ("; ".join(flip_v) or "ok")))
    other_v = [v for v in (obs.violations if obs else []) if not v.startswith(("two owners", "flip"))]
    oc = load.over_cap()
    worst = f"{as_percent(oc.worst.utilisation)} ({oc.worst.key})" if oc.worst else "-"
    out.append(Check(f"{CAP_CHECK} and none above {100 * MAX_UTILISATION:.0f}%, measured at the workers", oc.ok,
                     f"{oc.over} of {oc.worker_windows} worker-windows over the cap ({100 * oc.share:.1f}%), "
                     f"{oc.above_limit} above {100 * MAX_UTILISATION:.0f}%, worst {worst}"
                     + ("" if oc.worker_windows else "; no worker-window measured")))
    outages = [f.record for f in state.faults if f.record.outage]
    out.append(served_check(obs.unserved_spans() if obs is not None else None, outages, WorkerSettings().lease_s))
    loop_errors = {loop.name: loop.errors for loop in loops(state) if loop.errors}
    fatal = state.failure or state.interrupted or next((f"{loop.name}: {loop.fatal}" for loop in loops(state)
                                                       if loop.fatal), None)
    out.append(Check("components ran to the end and every event came out before the tail timeout",
                     fatal is None and state.drained_cleanly and not other_v,
                     f"failure: {fatal or 'none'}; all events out: {state.drained_cleanly}; "
                     f"loop errors: {sum(len(e) for e in loop_errors.values())}; other: {other_v or 'none'}"))
    return out


def served_check(spans: Sequence[tuple[float, float, int]] | None, outages: Sequence[FaultRecord],
                 lease_s: float) -> Check:
    """The router never pointed at a version with no running worker for longer than one lease.

    ``spans`` are the observer's ``(start, end, version)`` spans without a running worker of the active version
    (None: no observer, the check fails). A span that starts while an injected fault that stops the live version's
    workers is open (``outages``: ``hook-timeout``, ECS rolling the deployment back after the flip) is that fault's
    outage: it is judged against the fault's deadline and reported on its own line of the detail, never dropped.
    """
    if spans is None:
        return Check(f"the router never pointed at a version with no running worker for longer than one lease "
                     f"({lease_s:g}s)", False, "no observer")

    def cause(start: float) -> FaultRecord | None:
        return next((r for r in outages if r.injected_at is not None and r.injected_at <= start
                     and (r.recovered_at is None or start <= r.recovered_at)), None)

    judged = [(b - a, v, cause(a)) for a, b, v in spans]
    own = [(d, v) for d, v, r in judged if r is None]
    gap, gap_v = max(own, default=(0.0, None))
    faulted = [(d, v, r) for d, v, r in judged if r is not None]
    late = [(d, v, r) for d, v, r in faulted if d > r.deadline_s]
    detail = (f"longest span without a running worker of the active version: {gap:.1f}s"
              + (f" (v{gap_v})" if gap_v is not None else "") + f"; {len(own)} span(s)")
    if faulted:
        detail += "; while an injected fault stopped the live version's workers: " + ", ".join(
            f"{d:.1f}s (v{v}, {r.fault}, deadline {r.deadline_s:g}s)" for d, v, r in faulted)
    return Check(f"the router never pointed at a version with no running worker for longer than one lease "
                 f"({lease_s:g}s; a fault that stops its workers: that fault's deadline)",
                 gap <= lease_s and not late, detail)


def demonstrated(state: RunState, spec_json: dict[str, Any], load: WorkerLoad) -> list[tuple[str, bool, str]]:
    """What the run was meant to show (not invariants: a short run may not reach all of them)."""
    obs = state.observer
    rebalances = [(o, n) for o, n, _ in (obs.flips if obs else []) if o is not None]
    rows = spec_json.get("comparisons", [])
    declined = [r for r in rows if r.get("status") == "held"]
    compared = [r for r in rows if r.get("published") and "old_mismatch" in r]
    worst = max(compared, key=lambda r: r["old_mismatch"], default=None)
    shown = []
    if state.crowd is not None:
        rel = relief_of(state, load)
        shown.append((f"--surge: the crowd relieved within {RELIEF_TARGET_S:g}s of its first event",
                      rel is not None and rel.ok,
                      "the crowd never came" if rel is None else "no relief went live" if rel.seconds is None else
                      f"v{rel.version} live {rel.seconds:.1f}s after ({'fast' if rel.by_fast_path else 'window'} path)"))
    return [
        *shown,
        ("at least two rebalances with blue/green flips", len(rebalances) >= 2,
         ", ".join(f"v{o}->v{n}" for o, n in rebalances) or "none"),
        ("the policy declining a redeploy", bool(declined),
         f"{len(declined)} snapshot(s) held" + (f", e.g. {declined[0]['declined'][:150]}" if declined else "")),
        ("old spec under new load vs rebuilt spec (the snapshot's estimate)", worst is not None,
         f"largest: v{worst['old_version']} at {100 * worst['old_mismatch']:.0f}% of the cap under the snapshot that "
         f"triggered v{worst['new_version']} (rebuilt: {100 * worst['new_mismatch']:.0f}%)" if worst
         else "no rebalance compared"),
    ]


def loops(state: RunState) -> list[Any]:
    """The loop threads the run started (each has a ``name``, ``errors`` and ``fatal``)."""
    return [x for x in (state.replayer, state.notifier, state.surge_notifier, state.router, state.deployer,
                        state.observer) if x is not None]
