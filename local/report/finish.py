"""The end-of-run report: what happened, whether it was right, and the files that show it.

:func:`collect_live` reads from the live moto server what the report needs (snapshot
manifests and rows, quarantine records, cost reports) before teardown; :func:`finish`
computes the sections and invariants, prints ``report.txt``, writes ``report.json``, the
specs (JSON and GeoJSON), the PNG figures, and returns the exit code.

The report leads with **utilisation measured at the workers** (:mod:`local.worker_load`:
the events each worker process received per window (sent in the window, processed by it),
the same events by the write time of its output with the lag between the two, and the CPU
its cost reports measured). The snapshot's view of the same load (the "mismatch" of an old
spec under a new snapshot) follows as a secondary section, labelled as an estimate.

Invariants (exit 1 when one breaks):

* **delivery**: every valid event sent comes out of the workers after dedupe by
  ``event_id``; nothing comes out that was not sent; no enriched line is unreadable.
* **lease safety**: no lease changed owner while the previous owner still held it
  (:class:`local.observe.ControlObserver`).
* **flip safety**: ``active`` never moved to a version before all its leases were
  owned, unexpired and ready.
* **served**: the version ``active`` names (the router's target) never went longer than one
  lease duration without a lease held by a running worker process (``ControlObserver``).
* **cap, at the workers**: at most 2 % of worker-windows over the cap and none above
  110 % of it (:data:`local.worker_load.MAX_OVER_CAP_SHARE`, ``MAX_UTILISATION``; what a
  worker-window is: :mod:`local.worker_load`). No worker-window at all fails it.
* **components**: the Spark job, the loops and the handlers ran without a fatal error,
  and the tail drained before the timeout.
* **swaps** (:mod:`local.swaps`): never two readers of one cell at once; each entity's
  records of one version processed before any of a later one; in ``carry`` mode the median
  swap keeps at least 80 % of its slots in their processes. The swap section lists each
  swap's carried / started / stopped slots, moved cells and extra worker-seconds, and the
  swap timings (``report.json`` ``swaps``, ``swap_timings``).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from local import swaps
from local.fleet import WorkerSettings
from local.output import Delivery, delivery, read_quarantine
from local.worker_load import (
    MAX_OVER_CAP_SHARE,
    MAX_UTILISATION,
    CostSample,
    Span,
    WorkerLoad,
    cost_sample,
    live_spans,
    measure,
    measured_span,
)

if TYPE_CHECKING:
    from local.run import RunState


@dataclass(frozen=True)
class Check:
    """One invariant: name, whether it held, and the evidence."""

    name: str
    ok: bool
    detail: str


def collect_live(state: RunState) -> None:
    """Read manifests, snapshot rows, quarantine records and cost reports from moto."""
    aws = state.aws
    assert aws is not None
    s3 = aws.client("s3")
    snaps = []
    invocations = state.notifier.invocations if state.notifier else []
    from local.specs_report import outcome

    for inv in invocations:
        if outcome(inv.result)[0] == "rejected":
            continue  # fed no spec (e.g. --faults snapshot-corrupt: maybe not even JSON); the timeline names it
        manifest = json.loads(s3.get_object(Bucket=aws.names.snapshots_bucket, Key=inv.key)["Body"].read())
        texts = []
        for i, f in enumerate(manifest.get("files", [])):
            text = s3.get_object(Bucket=aws.names.snapshots_bucket, Key=f["key"])["Body"].read().decode()
            texts.append(text if i == 0 else text.split("\n", 1)[1] if "\n" in text else "")
        snaps.append({"key": inv.key, "invoked_at": inv.at, "manifest": manifest, "rows_text": "".join(texts),
                      "desired_after": state.desired_after.get(inv.key), "error": inv.error,
                      "result": inv.result})
    state.live["snapshots"] = snaps
    state.live["quarantine"] = read_quarantine(s3, aws.names.quarantine_bucket)
    per_version: Counter[str] = Counter()
    costs: list[CostSample] = []
    problems: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=aws.names.costs_bucket, Prefix="costs/"):
        for obj in page.get("Contents", []):
            per_version[obj["Key"].split("/")[1]] += 1
            where = f"s3://{aws.names.costs_bucket}/{obj['Key']}"
            try:
                costs.append(cost_sample(json.loads(s3.get_object(Bucket=aws.names.costs_bucket, Key=obj["Key"])
                                                    ["Body"].read()), where))
            except ValueError as exc:
                problems.append(str(exc))
    state.live["cost_reports"] = dict(per_version)
    state.live["costs"] = costs
    state.live["cost_problems"] = problems


def _fmt_t(state: RunState, t: float | None) -> str:
    return "-" if t is None else f"{t - state.started_at:7.1f}s"


def _epoch(iso: Any) -> float | None:
    try:
        return dt.datetime.fromisoformat(str(iso).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def built_from_windows(state: RunState) -> dict[int, float]:
    """Version -> end of the snapshot window (epoch s) the partitioner built it from."""
    from local.specs_report import outcome

    out: dict[int, float] = {}
    for snap in state.live.get("snapshots", []):
        status, _, version = outcome(snap["result"])
        end = _epoch(snap["manifest"].get("window_end"))
        if status == "published" and version is not None and end is not None:
            out[version] = end
    return out


def flip_times(state: RunState) -> list[tuple[int, float]]:
    """``(version, flipped_at)`` of every flip the observer saw (the control record's time)."""
    obs = state.observer
    if obs is None:
        return []
    return [(new, at) for _, new, _ in obs.flips if (at := obs.timeline(new).flipped_at) is not None]


def worker_load(state: RunState) -> WorkerLoad:
    """Utilisation at the workers (:mod:`local.worker_load`) for this run."""
    cfg, r = state.config, state.replayer
    records = state.output.records if state.output else []
    live_from = r.started_at if r is not None and r.started_at is not None else float("inf")
    replay_end = r.ended_at if r is not None and r.ended_at is not None else (state.replay_ended_at or 0.0)
    span = measured_span(records, live_from, replay_end) if live_from < float("inf") else Span(0.0, 0.0)
    return measure(records, state.live.get("costs", []), live_spans(flip_times(state)), span, cfg.window_s, cfg.cap)


def flips_section(state: RunState, load: WorkerLoad, built_for: dict[int, float]) -> tuple[list[dict[str, Any]],
                                                                                           list[str]]:
    """Per version: snapshot window end -> deploy start -> green ready -> flip -> blue drained.

    Also the loop's snapshot-to-live latency (window end -> flip) and whether the load the spec
    was built for still held when it was live: its busiest worker under its own snapshot
    (``built_for``) against the busiest worker-window measured while it was active.
    """
    obs = state.observer
    rows: list[dict[str, Any]] = []
    lines = ["FLIPS (run time; the snapshot window the spec was built from ends -> deploy start -> green ready -> flip "
             "-> previous version drained; deploy and flip are the control records' times, green and drained when the "
             "observer first saw them, polling every 0.5 s)",
             f"  {'flip':<10} {'workers':>7} {'window end':>10} {'deploy':>9} {'green':>9} {'flip':>9} "
             f"{'blue drained':>13} {'window->flip':>12} {'built for':>9} {'measured':>8}"]
    if obs is None:
        return rows, [*lines, "  (no observer)"]
    windows = built_from_windows(state)
    spans = live_spans(flip_times(state))
    cells = load.cells()
    for old, new, _ in obs.flips:
        tl = obs.timeline(new)
        blue = obs.timeline(old) if old is not None else None
        drained = blue.drained_at if blue else None
        end = windows.get(new)
        latency = tl.flipped_at - end if tl.flipped_at is not None and end is not None else None
        span = spans.get(new)
        live = [c.utilisation for c in cells if span is not None and span.covers(c.start_s, c.start_s + load.window_s)]
        measured = max(live, default=None)
        row = {"from": old, "to": new, "workers": tl.slots, "window_end": end, "deploy_started_at": tl.deploy_started_at,
               "green_ready_at": tl.green_ready_at, "flipped_at": tl.flipped_at, "blue_drained_at": drained,
               "window_to_flip_s": latency, "built_for_max_utilisation": built_for.get(new),
               "measured_max_utilisation": measured, "statuses": tl.statuses}
        rows.append(row)
        lines.append(f"  {(f'v{old}' if old else 'start') + f'->v{new}':<10} {tl.slots:>7} {_fmt_t(state, end):>10} "
                     f"{_fmt_t(state, tl.deploy_started_at):>9} {_fmt_t(state, tl.green_ready_at):>9} "
                     f"{_fmt_t(state, tl.flipped_at):>9} {_fmt_t(state, drained):>13} "
                     f"{'-' if latency is None else f'{latency:.1f}s':>12} {_pct(built_for.get(new)):>9} "
                     f"{_pct(measured):>8}")
    rebalances = sorted(r["window_to_flip_s"] for r in rows if r["window_to_flip_s"] is not None and r["from"])
    first = rows[0]["window_to_flip_s"] if rows and rows[0]["from"] is None else None
    if rebalances:
        lines.append(f"  snapshot-to-live latency (window end -> flip) of the rebalances: median "
                     f"{rebalances[len(rebalances) // 2]:.1f}s, max {rebalances[-1]:.1f}s = "
                     f"{rebalances[-1] / load.window_s:.1f} windows of {load.window_s:g}s"
                     + (f" (the first spec, with Spark's cold start: {first:.1f}s)" if first is not None else ""))
    lines.append("  'built for' = busiest worker under its own snapshot; 'measured' = busiest worker-window while it "
                 "was active, at the workers")
    return rows, lines


def _pct(u: float | None) -> str:
    return "-" if u is None else f"{100 * u:.0f}%"


def utilisation_section(state: RunState, load: WorkerLoad) -> list[str]:
    """The report's lead: the over-cap target, per-window max/p90/median, CPU, and a table per worker."""
    cfg = state.config
    oc = load.over_cap()
    lines = [f"UTILISATION AT THE WORKERS (events each worker process received per {cfg.window_s:g}s window: sent in "
             f"the window, processed by that process; % of the cap {cfg.cap:g})"]
    if not load.received:
        return [*lines, "  (no output)"]
    t = state.started_at
    worst = (f"worst {_pct(oc.worst.utilisation)} ({oc.worst.key}, window at {oc.worst.start_s - t:.0f}s)"
             if oc.worst else "no worker-window measured")
    lines += [f"  {'OK' if oc.ok else 'OVER TARGET'}: {oc.over} of {oc.worker_windows} worker-windows over the cap "
              f"({100 * oc.share:.1f}%, target <= {100 * MAX_OVER_CAP_SHARE:g}%), {oc.above_limit} above "
              f"{100 * MAX_UTILISATION:.0f}%; {worst}",
              f"  a worker-window: a window in which the worker's version was active throughout, inside the measured "
              f"span {load.measured.start_s - t:.0f}s-{load.measured.end_s - t:.0f}s (after the warm-up backlog, "
              "before the replay stopped); (n) = partial window, shown but not counted",
              f"  {_coverage(load)}",
              f"  {_write_time_view(load)}"]
    cpu = [(k, c, load.processed[k][i]) for k, s in load.cpu_s.items() for i, c in enumerate(s)
           if load.counted[k][i] and load.cpu_known[k][i]]
    if cpu and sum(n for *_, n in cpu):
        busiest = max(cpu, key=lambda x: x[1])
        lines.append(f"  measured cost (workers' cost reports, transform CPU): {1e6 * sum(c for _, c, _ in cpu) / sum(n for *_, n in cpu):.0f} "
                     f"us per event; busiest worker-window {1e3 * busiest[1]:.0f} ms CPU ({busiest[0]}, "
                     f"{100 * busiest[1] / load.window_s:.1f}% of one core)")
    header = "  " + f"{'window at (run s)':<18}" + "".join(f"{load.window_start(i) - t:>6.0f}" for i in range(load.n_windows))
    lines.append(header)
    for key in sorted(load.received, key=_version_order):
        cells = []
        for n, counted in zip(load.received[key], load.counted[key], strict=True):
            pct = round(100 * n / load.cap)
            cells.append(f"{pct:>6}" if counted else f"{f'({pct})':>6}" if n else f"{'.':>6}")
        lines.append("  " + f"{key:<18}" + "".join(cells))
    stats = [load.window_stats(i) for i in range(load.n_windows)]
    for name in ("max", "p90", "median"):
        lines.append("  " + f"{name + ' (counted)':<18}" + "".join(
            f"{round(100 * getattr(s, name)):>6}" if s else f"{'-':>6}" for s in stats))
    cpu_row = [max((load.cpu_s[k][i] for k in load.cpu_s if load.counted[k][i] and load.cpu_known[k][i]), default=None)
               for i in range(load.n_windows)]
    lines.append("  " + f"{'max CPU ms':<18}" + "".join(f"{1e3 * c:>6.0f}" if c is not None else f"{'-':>6}"
                                                         for c in cpu_row))
    return lines


def _write_time_view(load: WorkerLoad) -> str:
    """The same records by the write time of the output, and the lag that separates the two views."""
    oc = load.over_cap(load.processed)
    worst = f", worst {_pct(oc.worst.utilisation)} ({oc.worst.key})" if oc.worst else ""
    lag = load.lag
    lag_text = (f"lag from send to output: p50 {lag.p50_s:.1f}s, p99 {lag.p99_s:.1f}s, max {lag.max_s:.1f}s "
                f"({lag.worst_key})" if lag else "lag: no record in the measured span")
    return (f"by write time (catch-up after a pause counts where it was written): {oc.over} of {oc.worker_windows} "
            f"over the cap{worst}; {lag_text}")


def _coverage(load: WorkerLoad) -> str:
    """How many windows of the measured span were counted, and why the others were not."""
    span = [i for i in range(load.n_windows)
            if load.measured.covers(load.window_start(i), load.window_start(i) + load.window_s)]
    counted = [i for i in span if any(c[i] for c in load.counted.values())]
    return (f"windows counted: {len(counted)} of the {len(span)} whole windows in the measured span (the others "
            "had no worker active throughout, e.g. a flip inside)")


def _version_order(key: str) -> tuple[int, str]:
    head, _, rest = key.partition("/")
    return (int(head[1:]), rest) if head[1:].isdigit() else (0, key)


def utilisation_json(load: WorkerLoad) -> dict[str, Any]:
    """``report.json`` ``utilisation``: ``cap`` and ``events`` (counted worker-windows, 0 elsewhere) and the rest."""
    oc = load.over_cap()
    by_write = load.over_cap(load.processed)
    return {"source": "workers' enriched records: events per worker process by send time (received) and by "
                      "output write time (processed); cost reports", "cap": load.cap,
            "window_s": load.window_s, "window_starts": [load.window_start(i) for i in range(load.n_windows)],
            "events": load.counted_events(), "received": {k: list(v) for k, v in load.received.items()},
            "processed": {k: list(v) for k, v in load.processed.items()},
            "processed_over_cap": {"over_cap": by_write.over, "above_limit": by_write.above_limit,
                                   "worst": asdict(by_write.worst) if by_write.worst else None},
            "lag_s": asdict(load.lag) if load.lag else None,
            "counted": {k: list(v) for k, v in load.counted.items()},
            "cpu_s": {k: [round(c, 6) for c in v] for k, v in load.cpu_s.items()},
            "cpu_known": {k: list(v) for k, v in load.cpu_known.items()},
            "measured_span": [load.measured.start_s, load.measured.end_s],
            "worker_windows": oc.worker_windows, "over_cap": oc.over, "over_cap_share": oc.share,
            "above_limit": oc.above_limit, "worst": asdict(oc.worst) if oc.worst else None,
            "limits": {"over_cap_share": MAX_OVER_CAP_SHARE, "utilisation": MAX_UTILISATION}}


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
    worst = f"{_pct(oc.worst.utilisation)} ({oc.worst.key})" if oc.worst else "-"
    out.append(Check(f"at most {100 * MAX_OVER_CAP_SHARE:g}% of worker-windows over the cap and none above "
                     f"{100 * MAX_UTILISATION:.0f}%, measured at the workers", oc.ok,
                     f"{oc.over} of {oc.worker_windows} worker-windows over the cap ({100 * oc.share:.1f}%), "
                     f"{oc.above_limit} above {100 * MAX_UTILISATION:.0f}%, worst {worst}"
                     + ("" if oc.worker_windows else "; no worker-window measured")))
    gap, gap_v = obs.longest_unserved() if obs is not None else (0.0, None)
    lease_s = WorkerSettings().lease_s
    out.append(Check(f"the router never pointed at a version with no running worker for longer than one lease "
                     f"({lease_s:g}s)", obs is not None and gap <= lease_s,
                     f"longest span without a running worker of the active version: {gap:.1f}s"
                     + (f" (v{gap_v})" if gap_v is not None else "") + f"; {len(obs.unserved) if obs else 0} span(s)"))
    loop_errors = {loop.name: loop.errors for loop in _loops(state) if loop.errors}
    fatal = state.failure or state.interrupted or next((f"{loop.name}: {loop.fatal}" for loop in _loops(state)
                                                       if loop.fatal), None)
    out.append(Check("components ran to the end and every event came out before the tail timeout",
                     fatal is None and state.drained_cleanly and not other_v,
                     f"failure: {fatal or 'none'}; all events out: {state.drained_cleanly}; "
                     f"loop errors: {sum(len(e) for e in loop_errors.values())}; other: {other_v or 'none'}"))
    return out


def demonstrated(state: RunState, spec_json: dict[str, Any]) -> list[tuple[str, bool, str]]:
    """What the run was meant to show (not invariants: a short run may not reach all of them)."""
    obs = state.observer
    rebalances = [(o, n) for o, n, _ in (obs.flips if obs else []) if o is not None]
    rows = spec_json.get("comparisons", [])
    declined = [r for r in rows if r.get("status") == "held"]
    compared = [r for r in rows if r.get("published") and "old_mismatch" in r]
    worst = max(compared, key=lambda r: r["old_mismatch"], default=None)
    return [
        ("at least two rebalances with blue/green flips", len(rebalances) >= 2,
         ", ".join(f"v{o}->v{n}" for o, n in rebalances) or "none"),
        ("the policy declining a redeploy", bool(declined),
         f"{len(declined)} snapshot(s) held" + (f", e.g. {declined[0]['declined'][:150]}" if declined else "")),
        ("old spec under new load vs rebuilt spec (seed 000; the snapshot's estimate)", worst is not None,
         f"largest: v{worst['old_version']} at {100 * worst['old_mismatch']:.0f}% of the cap under the snapshot that "
         f"triggered v{worst['new_version']} (rebuilt: {100 * worst['new_mismatch']:.0f}%)" if worst
         else "no rebalance compared"),
    ]


def io_lines(state: RunState, d: Delivery) -> list[str]:
    """Quarantined events by reason, and events in vs out."""
    q = state.live.get("quarantine")
    bad = state.replayer.bad_sent if state.replayer else {}
    lines = ["", "QUARANTINED EVENTS (injected on purpose: one per reason code, bad_type twice)",
             f"  injected: {sum(bad.values())} {dict(sorted(bad.items()))}"]
    if q is not None:
        lines.append(f"  quarantined records: {q.total} by reason {dict(sorted(q.by_reason.items()))} "
                     f"by writer {q.by_writer}")
    return [*lines, "", "EVENTS IN vs OUT", f"  valid events sent {d.sent}; enriched records {d.out_records}; unique "
            f"event_ids out {d.out_unique}; duplicates (at-least-once, removed by dedupe) {d.duplicates}; "
            f"lost {d.lost}; unexpected {d.unexpected}",
            f"  router: {state.router.records_in if state.router else 0} ingest records read, "
            f"{state.router.invocations if state.router else 0} invocations, "
            f"{state.router.failed_items if state.router else 0} batch item failures retried",
            f"  cost reports by version: {state.live.get('cost_reports', {})}"]


def _loops(state: RunState) -> list[Any]:
    return [x for x in (state.replayer, state.notifier, state.router, state.deployer, state.observer) if x is not None]


def finish(state: RunState) -> int:
    """Print and write the report; return 0 if every invariant held, else 1."""
    from local import calls, specs_report

    cfg = state.config
    cfg.out.mkdir(parents=True, exist_ok=True)
    wall = (state.finished_at or time.time()) - state.started_at
    load = worker_load(state)
    text = ["", "=" * 100, f"GEO REBALANCER LOCAL RUN: {wall:.0f}s wall, dataset {cfg.dataset!r}, "
            f"{cfg.rate:g} events/s for {cfg.duration_s:g}s at {cfg.speed:g}x, cap {cfg.cap:g} per "
            f"{cfg.window_s:g}s window, seed {cfg.seed}", "=" * 100, "", *utilisation_section(state, load),
            "", "TIMELINE", *state.events_log, ""]
    report_errors: list[str] = []
    try:
        spec_json, spec_lines, figures = specs_report.write(state)
    except Exception as exc:  # another component's library broke: still write the rest of the report
        report_errors.append(f"spec sections (tables, comparisons, maps, GeoJSON) failed: {type(exc).__name__}: {exc}")
        spec_json, spec_lines, figures = {}, [f"SPEC SECTIONS FAILED: {report_errors[-1]}"], []
    text += spec_lines
    built_for = {int(v): e["metrics"]["max_utilisation"] for v, e in spec_json.get("versions", {}).items()
                 if "metrics" in e}
    flips, flip_lines = flips_section(state, load, built_for)
    text += ["", *flip_lines]
    try:
        figures += specs_report.utilisation_figure(state, load, flip_times(state))
    except Exception as exc:
        report_errors.append(f"utilisation figure failed: {type(exc).__name__}: {exc}")
    report_errors += state.live.get("cost_problems", [])[:5]
    sent = state.replayer.sent_ids if state.replayer else []
    d = delivery(sent, state.output.records if state.output else [])
    text += io_lines(state, d)
    swaps_rep = swaps.from_run(state.observer, state.fleet, state.output.processed if state.output else [])
    text += ["", *swaps.report_lines(swaps_rep)]
    results = checks(state, load)
    results += [Check(name, ok, detail) for name, ok, detail in swaps.checks(swaps_rep, cfg.swap_mode)]
    results.append(Check("the report was written completely", not report_errors, "; ".join(report_errors) or "ok"))
    if state.calls is not None:
        budget_lines, below = calls.section(state.calls, cfg.out / "calls")
        text += ["", *budget_lines]
        results.append(Check("every AWS API at or below half its documented quota (local/calls.py)", not below,
                             "; ".join(below) or "ok"))
    text += ["", "INVARIANTS"] + [f"  [{'PASS' if c.ok else 'FAIL'}] {c.name}: {c.detail}" for c in results]
    errors = [(loop.name, e) for loop in _loops(state) for e in loop.errors]
    if errors:
        text += ["", f"LOOP ERRORS ({len(errors)}; first 5)"] + [f"  {n}: {e.strip()[-600:]}" for n, e in errors[:5]]
    shown = demonstrated(state, spec_json)
    text += ["", "WHAT THIS RUN SHOWED"] + [f"  [{'yes' if ok else 'NO '}] {what}: {detail}" for what, ok, detail in shown]
    text += ["", f"files in {cfg.out}: " + ", ".join(["report.txt", "report.json", *(p.name for p in figures),
                                                      "specs/v*.json", "specs/v*.geojson", "logs/"])]
    ok = all(c.ok for c in results)
    oc = load.over_cap()
    text.append(f"SUMMARY: {oc.over} of {oc.worker_windows} worker-windows over the cap ({100 * oc.share:.1f}%), worst "
                f"{_pct(oc.worst.utilisation if oc.worst else None)} at the workers; events in {d.sent}, out "
                f"{d.out_unique} unique; {len(flips)} flips; {wall:.0f}s wall")
    text.append(f"RESULT: {'OK' if ok else 'FAILED'}")
    report_text = "\n".join(text)
    print(report_text, flush=True)
    (cfg.out / "report.txt").write_text(report_text + "\n")
    doc = {"config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()} | {"cap": cfg.cap},
           "wall_s": wall, "timeline": state.events_log, "specs": spec_json, "flips": flips,
           "utilisation": utilisation_json(load),
           "quarantine": asdict(q) if (q := state.live.get("quarantine")) is not None else None,
           "bad_injected": state.replayer.bad_sent if state.replayer else {},
           "delivery": asdict(d), "invariants": [asdict(c) for c in results],
           "loop_errors": [{"loop": n, "error": e} for n, e in errors], "ok": ok,
           "figures": [p.name for p in figures],
           "demonstrated": [{"what": w, "ok": ok, "detail": d} for w, ok, d in shown],
           **swaps.report_json(swaps_rep)}
    (cfg.out / "report.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return 0 if ok else 1
