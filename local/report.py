"""The end-of-run report: what happened, whether it was right, and the files that show it.

:func:`collect_live` reads from the live moto server what the report needs (snapshot
manifests and rows, quarantine records, cost reports) before teardown; :func:`finish`
computes the sections and invariants, prints ``report.txt``, writes ``report.json``, the
specs (JSON and GeoJSON), the PNG figures, and returns the exit code.

Invariants (exit 1 when one breaks):

* **delivery**: every valid event sent comes out of the workers after dedupe by
  ``event_id``; nothing comes out that was not sent; no enriched line is unreadable.
* **lease safety**: no lease changed owner while the previous owner still held it
  (:class:`local.observe.ControlObserver`).
* **flip safety**: ``active`` never moved to a version before all its leases were
  owned, unexpired and ready.
* **cap**: no worker is over its cap (events per window > ``max_load``) for longer than
  the policy allows: ``2 * window + cooldown + green timeout`` (one window to see the
  load, one for the snapshot to land, the cooldown, and the time a green fleet gets to
  become ready).
* **components**: the Spark job, the loops and the handlers ran without a fatal error,
  and the tail drained before the timeout.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from local.output import delivery, read_quarantine, utilisation

if TYPE_CHECKING:
    from local.run import RunState



@dataclass(frozen=True)
class Check:
    """One invariant: name, whether it held, and the evidence."""

    name: str
    ok: bool
    detail: str


def collect_live(state: RunState) -> None:
    """Read manifests, snapshot rows, quarantine records and cost report counts from moto."""
    aws = state.aws
    assert aws is not None
    s3 = aws.client("s3")
    snaps = []
    invocations = state.notifier.invocations if state.notifier else []
    for inv in invocations:
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
    costs = Counter()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=aws.names.costs_bucket, Prefix="costs/"):
        for obj in page.get("Contents", []):
            costs[obj["Key"].split("/")[1]] += 1
    state.live["cost_reports"] = dict(costs)


def _fmt_t(state: RunState, t: float | None) -> str:
    return "-" if t is None else f"{t - state.started_at:7.1f}s"


def flips_section(state: RunState) -> tuple[list[dict[str, Any]], list[str]]:
    """Per version: deploy start -> green ready -> flip -> blue (previous version) drained."""
    obs = state.observer
    rows: list[dict[str, Any]] = []
    lines = ["FLIPS (run time; deploy start -> green ready -> flip -> previous version drained; deploy and flip are "
             "the control records' times, green and drained when the observer first saw them (it polls every "
             "0.5 s, so green can trail the flip record by one poll))",
             f"  {'flip':<10} {'workers':>7} {'deploy':>9} {'green':>9} {'flip':>9} {'blue drained':>13} "
             f"{'ready->flip':>11} {'flip->drained':>13}"]
    if obs is None:
        return rows, [*lines, "  (no observer)"]
    for old, new, _ in obs.flips:
        tl = obs.timeline(new)
        blue = obs.timeline(old) if old is not None else None
        drained = blue.drained_at if blue else None
        row = {"from": old, "to": new, "workers": tl.slots, "deploy_started_at": tl.deploy_started_at,
               "green_ready_at": tl.green_ready_at, "flipped_at": tl.flipped_at, "blue_drained_at": drained,
               "statuses": tl.statuses}
        rows.append(row)
        r2f = f"{tl.flipped_at - tl.green_ready_at:.1f}s" if tl.flipped_at and tl.green_ready_at else "-"
        f2d = f"{drained - tl.flipped_at:.1f}s" if drained and tl.flipped_at else ("-" if old else "n/a")
        lines.append(f"  {(f'v{old}' if old else 'start') + f'->v{new}':<10} {tl.slots:>7} "
                     f"{_fmt_t(state, tl.deploy_started_at):>9} {_fmt_t(state, tl.green_ready_at):>9} "
                     f"{_fmt_t(state, tl.flipped_at):>9} {_fmt_t(state, drained):>13} {r2f:>11} {f2d:>13}")
    return rows, lines


def utilisation_section(state: RunState) -> tuple[Any, list[str]]:
    """Utilisation per worker per window (events by send time / cap) as a compact table."""
    cfg = state.config
    records = state.output.records if state.output else []
    series = utilisation(records, cfg.window_s, cfg.cap)
    lines = [f"WORKER UTILISATION OVER TIME (% of cap {cfg.cap:g} per {cfg.window_s:g}s window, by event send time)"]
    if not series.counts:
        return series, [*lines, "  (no output)"]
    n = len(next(iter(series.counts.values())))
    lines.append("  " + f"{'worker':<12}" + "".join(f"{int(i * cfg.window_s):>5}" for i in range(n)))
    for key in sorted(series.counts):
        util = series.utilisation(key)
        lines.append("  " + f"{key:<12}" + "".join(f"{round(100 * u):>5}" if u else f"{'.':>5}" for u in util))
    return series, lines


def checks(state: RunState, series: Any) -> list[Check]:
    """Evaluate the invariants of the module docstring."""
    cfg = state.config
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
    from local.run import GREEN_TIMEOUT_S

    allowed = 2 * cfg.window_s + cfg.cooldown_s + GREEN_TIMEOUT_S
    spans = series.over_cap_spans() if series.counts else {}
    worst = max(spans.items(), key=lambda kv: kv[1], default=("-", 0.0))
    out.append(Check("no worker over its cap longer than the policy allows", worst[1] <= allowed,
                     f"longest over-cap run {worst[1]:g}s ({worst[0]}), allowed {allowed:g}s "
                     f"(2 x window + cooldown + green timeout)"))
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
        ("old spec under new load vs rebuilt spec (seed 000)", worst is not None,
         f"worst: v{worst['old_version']} at {100 * worst['old_mismatch']:.0f}% vs rebuilt v{worst['new_version']} at "
         f"{100 * worst['new_mismatch']:.0f}%" if worst else "no rebalance compared"),
    ]


def _loops(state: RunState) -> list[Any]:
    return [x for x in (state.replayer, state.notifier, state.router, state.deployer, state.observer) if x is not None]


def finish(state: RunState) -> int:
    """Print and write the report; return 0 if every invariant held, else 1."""
    from local import specs_report

    cfg = state.config
    cfg.out.mkdir(parents=True, exist_ok=True)
    text: list[str] = []
    wall = (state.finished_at or time.time()) - state.started_at
    text += ["", "=" * 100, f"GEO REBALANCER LOCAL RUN: {wall:.0f}s wall, dataset {cfg.dataset!r}, "
             f"{cfg.rate:g} events/s for {cfg.duration_s:g}s at {cfg.speed:g}x, cap {cfg.cap:g} per "
             f"{cfg.window_s:g}s window, seed {cfg.seed}", "=" * 100, "", "TIMELINE", *state.events_log, ""]
    report_errors: list[str] = []
    try:
        spec_json, spec_lines, figures = specs_report.write(state)
    except Exception as exc:  # another component's library broke: still write the rest of the report
        report_errors.append(f"spec sections (tables, comparisons, maps, GeoJSON) failed: {type(exc).__name__}: {exc}")
        spec_json, spec_lines, figures = {}, [f"SPEC SECTIONS FAILED: {report_errors[-1]}"], []
    text += spec_lines
    flips, flip_lines = flips_section(state)
    text += ["", *flip_lines, ""]
    series, util_lines = utilisation_section(state)
    text += util_lines
    try:
        figures += specs_report.utilisation_figure(state, series)
    except Exception as exc:
        report_errors.append(f"utilisation figure failed: {type(exc).__name__}: {exc}")
    q = state.live.get("quarantine")
    text += ["", "QUARANTINED EVENTS (injected on purpose: one per reason code, bad_type twice)"]
    bad = state.replayer.bad_sent if state.replayer else {}
    text.append(f"  injected: {sum(bad.values())} {dict(sorted(bad.items()))}")
    if q is not None:
        text.append(f"  quarantined records: {q.total} by reason {dict(sorted(q.by_reason.items()))} "
                    f"by writer {q.by_writer}")
    sent = state.replayer.sent_ids if state.replayer else []
    d = delivery(sent, state.output.records if state.output else [])
    text += ["", "EVENTS IN vs OUT", f"  valid events sent {d.sent}; enriched records {d.out_records}; unique "
             f"event_ids out {d.out_unique}; duplicates (at-least-once, removed by dedupe) {d.duplicates}; "
             f"lost {d.lost}; unexpected {d.unexpected}",
             f"  router: {state.router.records_in if state.router else 0} ingest records read, "
             f"{state.router.invocations if state.router else 0} invocations, "
             f"{state.router.failed_items if state.router else 0} batch item failures retried",
             f"  cost reports by version: {state.live.get('cost_reports', {})}"]
    results = checks(state, series)
    results.append(Check("the report was written completely", not report_errors, "; ".join(report_errors) or "ok"))
    text += ["", "INVARIANTS"] + [f"  [{'PASS' if c.ok else 'FAIL'}] {c.name}: {c.detail}" for c in results]
    errors = [(loop.name, e) for loop in _loops(state) for e in loop.errors]
    if errors:
        text += ["", f"LOOP ERRORS ({len(errors)}; first 5)"] + [f"  {n}: {e.strip()[-600:]}" for n, e in errors[:5]]
    shown = demonstrated(state, spec_json)
    text += ["", "WHAT THIS RUN SHOWED"] + [f"  [{'yes' if ok else 'NO '}] {what}: {detail}" for what, ok, detail in shown]
    text += ["", f"files in {cfg.out}: " + ", ".join(["report.txt", "report.json", *(p.name for p in figures),
                                                      "specs/v*.json", "specs/v*.geojson", "logs/"])]
    ok = all(c.ok for c in results)
    text.append(f"RESULT: {'OK' if ok else 'FAILED'}")
    report_text = "\n".join(text)
    print(report_text, flush=True)
    (cfg.out / "report.txt").write_text(report_text + "\n")
    doc = {"config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()} | {"cap": cfg.cap},
           "wall_s": wall, "timeline": state.events_log, "specs": spec_json, "flips": flips,
           "utilisation": {"t0_s": series.t0_s, "window_s": series.window_s, "cap": series.cap,
                           "events": series.counts},
           "quarantine": asdict(q) if q is not None else None, "bad_injected": bad,
           "delivery": asdict(d), "invariants": [asdict(c) for c in results],
           "loop_errors": [{"loop": n, "error": e} for n, e in errors], "ok": ok,
           "figures": [p.name for p in figures],
           "demonstrated": [{"what": w, "ok": ok, "detail": d} for w, ok, d in shown]}
    (cfg.out / "report.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return 0 if ok else 1
