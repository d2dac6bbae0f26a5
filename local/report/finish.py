"""The report put together: ``report.txt`` (also printed), ``report.json``, the spec files and figures; the exit code.

:func:`finish` lays the sections out in this order: utilisation at the workers (:mod:`local.report.utilisation`),
the timeline, the spec sections (:mod:`local.report.specs`), the flips (:mod:`local.report.flips`), quarantined
events and events in vs out (:func:`io_lines`), the swaps (:mod:`local.report.swaps`), the oracle
(:mod:`local.report.reference`), the geofence events received on the loop's bus when the workers pushed some
(:mod:`local.report.eventbridge`), the output as a data product (:mod:`local.report.product`), the AWS budget
(:mod:`local.calls`), the invariants and what the run showed (:mod:`local.report.invariants`), then a summary.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from local import calls
from local.environment import geofence_events, replay_clocks
from local.oracle import OracleResult
from local.output import Delivery, delivery
from local.replay import RecordedReplayer
from local.report import eventbridge, handoff, product, reference, specs, surge, swaps
from local.report.figures import utilisation_figure
from local.report.flips import flip_times, flips_section
from local.report.invariants import Check, checks, demonstrated, loops
from local.report.utilisation import as_percent, utilisation_json, utilisation_section
from local.report.worker_load import Span, WorkerLoad, live_spans, measure, measured_span
from local.state import RunState


def measure_run(state: RunState) -> WorkerLoad:
    """Utilisation at the workers (:mod:`local.report.worker_load`) for this run."""
    cfg, r = state.config, state.replayer
    records = state.output.records if state.output else []
    live_from = r.started_at if r is not None and r.started_at is not None else float("inf")
    replay_end = r.ended_at if r is not None and r.ended_at is not None else (state.replay_ended_at or 0.0)
    span = measured_span(records, live_from, replay_end) if live_from < float("inf") else Span(0.0, 0.0)
    return measure(records, state.live.get("costs", []), live_spans(flip_times(state)), span, cfg.window_s, cfg.cap)


def io_lines(state: RunState, d: Delivery) -> list[str]:
    """Quarantined events by reason, and events in vs out."""
    q = state.live.get("quarantine")
    r = state.replayer
    bad = r.bad_sent if r else {}
    if isinstance(r, RecordedReplayer):
        bad = r.log.bad_by_reason()
        lines = ["", "QUARANTINED EVENTS (the recorded log's bad rows, written by the replay; source file:line)",
                 f"  bad rows: {len(r.log.bad)} {dict(sorted(bad.items()))}"]
    else:
        lines = ["", "QUARANTINED EVENTS (injected on purpose: one per reason code, bad_type twice)",
                 f"  injected: {sum(bad.values())} {dict(sorted(bad.items()))}"]
    if q is not None:
        lines.append(f"  quarantined records: {q.total} by reason {dict(sorted(q.by_reason.items()))} "
                     f"by writer {q.by_writer}")
    return [*lines, "", "EVENTS IN vs OUT", *recorded_in(r, state.config.transform),
            f"  valid events sent {d.sent}; enriched records {d.out_records}; unique "
            f"event_ids out {d.out_unique}; duplicates (at-least-once, removed by dedupe) {d.duplicates}; "
            f"lost {d.lost}; unexpected {d.unexpected}",
            f"  router: {state.router.records_in if state.router else 0} ingest records read, "
            f"{state.router.invocations if state.router else 0} invocations, "
            f"{state.router.failed_items if state.router else 0} batch item failures retried, "
            f"{state.router.gave_up if state.router else 0} records discarded by the event source (lost)",
            *([e.line()] if (e := early_events(state)) is not None else []),
            f"  cost reports by version: {state.live.get('cost_reports', {})}"]


@dataclass(frozen=True)
class EarlyEvents:
    """The events sent before the first spec was active: how many, how many came out, how long they waited."""

    live_after_s: float  # the first spec was active this long after the replay's first event
    sent: int
    came_out: int
    wait_p50_s: float | None
    wait_max_s: float | None

    def line(self) -> str:
        if not self.sent:
            return f"  before the first spec: no event sent (active {self.live_after_s:.1f}s after the replay began)"
        wait = ("" if self.wait_max_s is None else
                f"; they waited p50 {self.wait_p50_s:.1f}s, max {self.wait_max_s:.1f}s from send to output")
        return (f"  before the first spec (active {self.live_after_s:.1f}s after the replay began): {self.sent} events "
                f"sent, {self.came_out} came out{wait}")


def early_events(state: RunState) -> EarlyEvents | None:
    """How the events sent before the first spec was active fared: each comes out once a spec is live (the stack's
    event source holds them in the stream: ``infra/router.py``); None before the first spec."""
    r, out = state.replayer, state.output
    if r is None or out is None or r.live_at is None or r.began_at is None:
        return None
    live_ms = r.live_at * 1000
    first: dict[str, Any] = {}
    for rec in out.records:
        if rec.ts_ms < live_ms and (rec.event_id not in first or rec.written_ms < first[rec.event_id].written_ms):
            first[rec.event_id] = rec
    early = r.sent_ids[: r.backlog]
    waits = sorted((first[i].written_ms - first[i].ts_ms) / 1000 for i in early if i in first)
    return EarlyEvents(r.live_at - r.began_at, len(early), len(waits), waits[len(waits) // 2] if waits else None,
                       waits[-1] if waits else None)


def recorded_in(r: Any, transform: str) -> list[str]:
    """What a recorded replay sent, and which clock its times are on for the run's ``transform`` (none for the
    built-in replay)."""
    if not isinstance(r, RecordedReplayer):
        return []
    cut = len(r.log) - r.plan.send
    return [f"  recorded events sent {r.recorded_sent} of {len(r.log)} good rows (each once"
            + (f"; {cut} recorded after the --duration cap not sent" if cut else "") + f") + {r.warmup_sent} "
            f"warm-up copies of the log's first window ({r.warmup_passes} passes, ids <event_id>#warmup<k>, each "
            "pass's entities <entity_id>#warmup<k>)",
            f"  clocks: {replay_clocks(transform, r.plan.speed)}"]


@dataclass(frozen=True, slots=True)
class Sections:
    """The report's sections up to the swaps, and what the invariants and ``report.json`` take from them."""

    text: list[str]
    spec_json: dict[str, Any]
    figures: list[Path]
    flips: list[dict[str, Any]]
    delivered: Delivery
    swap_report: swaps.SwapsReport
    #: parts of the report that could not be written (they fail "the report was written completely")
    errors: list[str]
    #: the fleet's records against a single-process run (None with ``oracle_error`` when that run failed)
    oracle: OracleResult | None = None
    oracle_error: str | None = None
    #: the kept output queried per hour with pyarrow (OUTPUT AS A DATA PRODUCT)
    product: product.Product | None = None
    #: the geofence events received on the bus against the output (None: no bus, or ``eventbridge_error``)
    eventbridge: eventbridge.EventBridgeResult | None = None
    eventbridge_error: str | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    """Every invariant, the loops' errors and what the run showed."""

    checks: list[Check]
    loop_errors: list[tuple[str, str]]
    shown: list[tuple[str, bool, str]]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def sections(state: RunState, load: WorkerLoad, wall: float) -> Sections:
    """Write the spec files and figures; lay out every section from the header to the swaps."""
    cfg = state.config
    text = ["", "=" * 100, f"GEO REBALANCER LOCAL RUN: {wall:.0f}s wall, {cfg.source()}, "
            f"{cfg.rate:g} events/s for {cfg.duration_s:g}s at {cfg.speed:g}x, cap {cfg.cap:g} per "
            f"{cfg.window_s:g}s window, seed {cfg.seed}", "=" * 100, "", *utilisation_section(state, load),
            "", "TIMELINE", *state.events_log, ""]
    report_errors: list[str] = []
    try:
        spec_json, spec_lines, figures = specs.write(state)
    except Exception as exc:  # another component's library broke: still write the rest of the report
        report_errors.append(f"spec sections (tables, comparisons, maps, GeoJSON) failed: {type(exc).__name__}: {exc}")
        spec_json, spec_lines, figures = {}, [f"SPEC SECTIONS FAILED: {report_errors[-1]}"], []
    text += spec_lines
    if state.rejected:
        text += ["", f"REJECTED BUILDS ({len(state.rejected)}; each snapshot kept in {state.config.out / 'rejected'}/ "
                     "with the live spec and the build's exact input: the command rebuilds it)",
                 *(line for kept in state.rejected for line in kept.lines())]
    built_for = {int(v): e["metrics"]["max_utilisation"] for v, e in spec_json.get("versions", {}).items()
                 if "metrics" in e}
    flips, flip_lines = flips_section(state, load, built_for)
    text += ["", *flip_lines]
    text += surge.section(state, load)[0]
    try:
        figures += utilisation_figure(state, load, flip_times(state))
    except Exception as exc:
        report_errors.append(f"utilisation figure failed: {type(exc).__name__}: {exc}")
    report_errors += state.live.get("cost_problems", [])[:5]
    sent = state.replayer.sent_ids if state.replayer else []
    d = delivery(sent, state.output.records if state.output else [])
    text += io_lines(state, d)
    swaps_rep = swaps.from_run(state.observer, state.fleet, state.output.processed if state.output else [])
    text += ["", *swaps.report_lines(swaps_rep)]
    oracle, oracle_error = None, None
    try:
        oracle = reference.oracle_of(state)
    except Exception as exc:  # the transform could not be built or loaded here: the invariant fails and says why
        oracle_error = f"{type(exc).__name__}: {exc}"
    text += ["", *reference.section(oracle, oracle_error)]
    bridge, bridge_error = _eventbridge(state)
    text += ["", *(bridge.section() if bridge else [f"EVENTBRIDGE FAILED: {bridge_error}"])] if pushed(state) else []
    data = product.product_of(cfg.out, state.live.get("kept", []), dict(oracle.hours) if oracle is not None else None)
    text += ["", *product.section(data, cfg.out)]
    routers = [e.module for e in state.router.environments] if state.router else []
    stats = handoff.read_stats(sorted((cfg.out / "logs").glob("worker-*.log")), handoff.router_ledger_calls(routers))
    moved = handoff.section(stats, len(sent), _steady(state, stats))
    text += ["", *moved] if moved else []
    return Sections(text, spec_json, figures, flips, d, swaps_rep, report_errors, oracle, oracle_error, data,
                    bridge, bridge_error)


def pushed(state: RunState) -> bool:
    """Whether the run's workers pushed geofence transitions to the loop's bus (collected before teardown)."""
    if "geofence_events" in state.live:
        return True
    try:
        return geofence_events(state.config.transform)
    except Exception:  # a transform that cannot be built: the oracle's section says why
        return False


def _eventbridge(state: RunState) -> tuple[eventbridge.EventBridgeResult | None, str | None]:
    """The received geofence events against the output (None, None when the run pushed none)."""
    if not pushed(state):
        return None, None
    if "geofence_events" not in state.live:
        return None, "the geofence queue was not read (see the timeline)"
    try:
        puts = eventbridge.worker_puts(sorted((state.config.out / "logs").glob("worker-*.log")))
        return eventbridge.compare(state.output.enriched if state.output else [], state.live["geofence_events"],
                                   puts), None
    except Exception as exc:  # the report says what could not be compared
        return None, f"{type(exc).__name__}: {exc}"


def _steady(state: RunState, stats: handoff.HandoffStats) -> handoff.Steady | None:
    """The handoff's calls and events sent while the replay was live and no swap in progress."""
    rep, observer = state.replayer, state.observer
    if rep is None or rep.started_at is None or observer is None:
        return None
    end = state.finished_at or time.time()
    versions = observer.versions
    spans = handoff.swap_spans(observer.flips, {v: t.deploy_started_at for v, t in versions.items()},
                               {v: t.drained_at for v, t in versions.items()}, end)
    return handoff.steady(stats, (rep.started_at, rep.ended_at or end), spans, rep.sent_seconds)


def invariants(state: RunState, load: WorkerLoad, body: Sections) -> tuple[Verdict, list[str]]:
    """Judge the run; also return the AWS budget section (empty when this process counted no call)."""
    results = checks(state, load)
    results += [Check(name, ok, detail) for name, ok, detail in swaps.checks(body.swap_report, state.config.swap_mode)]
    results.append(Check(*reference.check(body.oracle, body.oracle_error)))
    if pushed(state):
        results.append(Check(*eventbridge.check(body.eventbridge, body.eventbridge_error)))
    if body.product is not None:
        results.append(Check(*product.check(body.product)))
    results.append(Check("the report was written completely", not body.errors, "; ".join(body.errors) or "ok"))
    budget: list[str] = []
    if state.twin is not None:
        gate = state.twin.gate
        budget += ["", *gate.summary()]
        results.append(Check("no AWS call denied: each part signs as its synthesized role (local.iam)",
                             not gate.denials, "; ".join(d.line() for d in gate.denials[:3]) or
                             f"{sum(gate.checked.values())} authorizations checked"))
    if state.calls is not None:
        budget_lines, below = calls.section(state.calls, state.config.out / "calls")
        budget += ["", *budget_lines]
        results.append(Check("every AWS API at or below half its documented quota (local/calls.py)", not below,
                             "; ".join(below) or "ok"))
    errors = [(loop.name, e) for loop in loops(state) for e in loop.errors]
    return Verdict(results, errors, demonstrated(state, body.spec_json, load)), budget


def closing(state: RunState, load: WorkerLoad, body: Sections, verdict: Verdict, wall: float) -> list[str]:
    """The invariants, the loop errors, what the run showed, the files, the summary and the result."""
    errors = verdict.loop_errors
    text = ["", "INVARIANTS"] + [f"  [{'PASS' if c.ok else 'FAIL'}] {c.name}: {c.detail}" for c in verdict.checks]
    if errors:
        text += ["", f"LOOP ERRORS ({len(errors)}; first 5)"] + [f"  {n}: {e.strip()[-600:]}" for n, e in errors[:5]]
    text += ["", "WHAT THIS RUN SHOWED"] + [f"  [{'yes' if ok else 'NO '}] {what}: {detail}"
                                          for what, ok, detail in verdict.shown]
    text += ["", f"files in {state.config.out}: " + ", ".join(["report.txt", "report.json",
                                                               *(p.name for p in body.figures),
                                                               "specs/v*.json", "specs/v*.geojson", "logs/",
                                                               *(["rejected/"] if state.rejected else []),
                                                               f"{product.KEPT_DIR}/ (output, snapshots)"])]
    oc, d = load.over_cap(), body.delivered
    r = state.replayer
    events_in = (f"{d.sent} ({r.recorded_sent} recorded + {r.warmup_sent} warm-up copies)"
                 if isinstance(r, RecordedReplayer) else f"{d.sent}")
    text.append(f"SUMMARY: {oc.over} of {oc.worker_windows} worker-windows over the cap ({100 * oc.share:.1f}%), worst "
                f"{as_percent(oc.worst.utilisation if oc.worst else None)} at the workers; events in {events_in}, out "
                f"{d.out_unique} unique; {len(body.flips)} flips; {wall:.0f}s wall")
    text.append(body.oracle.line() if body.oracle is not None else f"ORACLE FAILED: {body.oracle_error}")
    if pushed(state):
        text.append(body.eventbridge.line() if body.eventbridge else f"EVENTBRIDGE FAILED: {body.eventbridge_error}")
    if body.product is not None:
        text.append(product.summary_line(body.product))
    text.append(f"RESULT: {'OK' if verdict.ok else 'FAILED'}")
    return text


def document(state: RunState, load: WorkerLoad, body: Sections, verdict: Verdict, wall: float) -> dict[str, Any]:
    """``report.json``: the configuration, the timeline and every section as data."""
    cfg = state.config
    return {"config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()} | {"cap": cfg.cap},
            "wall_s": wall, "timeline": state.events_log, "specs": body.spec_json, "flips": body.flips,
            "utilisation": utilisation_json(load),
            "quarantine": asdict(q) if (q := state.live.get("quarantine")) is not None else None,
            "bad_injected": state.replayer.bad_sent if state.replayer else {},
            "recorded": ({**state.replayer.summary(), "clocks": replay_clocks(cfg.transform, state.replayer.plan.speed)}
                         if isinstance(state.replayer, RecordedReplayer) else None),
            "delivery": asdict(body.delivered), "invariants": [asdict(c) for c in verdict.checks],
            "loop_errors": [{"loop": n, "error": e} for n, e in verdict.loop_errors], "ok": verdict.ok,
            "figures": [p.name for p in body.figures], "rejected": [k.to_dict() for k in state.rejected],
            "demonstrated": [{"what": w, "ok": ok, "detail": d} for w, ok, d in verdict.shown],
            "oracle": reference.to_json(body.oracle, body.oracle_error), **swaps.report_json(body.swap_report),
            "data_product": product.to_json(body.product) if body.product is not None else None,
            "eventbridge": ({**asdict(body.eventbridge), "ok": body.eventbridge.ok} if body.eventbridge
                            else {"error": body.eventbridge_error} if pushed(state) else None),
            "before_first_spec": asdict(e) if (e := early_events(state)) is not None else None,
            "surge": surge.section(state, load)[1],
            "iam": None if state.twin is None else {
                "template": state.twin.template, "checked": dict(state.twin.gate.checked),
                "action_only": dict(state.twin.gate.action_only),
                "denied": [asdict(d) for d in state.twin.gate.denials]}}


def finish(state: RunState) -> int:
    """Print and write the report; return 0 if every invariant held, else 1."""
    cfg = state.config
    cfg.out.mkdir(parents=True, exist_ok=True)
    wall = (state.finished_at or time.time()) - state.started_at
    load = measure_run(state)
    body = sections(state, load, wall)
    verdict, budget = invariants(state, load, body)
    report_text = "\n".join(body.text + budget + closing(state, load, body, verdict, wall))
    print(report_text, flush=True)
    (cfg.out / "report.txt").write_text(report_text + "\n")
    (cfg.out / "report.json").write_text(json.dumps(document(state, load, body, verdict, wall), indent=1,
                                                    default=str) + "\n")
    return 0 if verdict.ok else 1
