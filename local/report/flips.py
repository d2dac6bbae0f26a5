"""The report's FLIPS section: per spec version, snapshot window end -> deploy -> green ready -> flip -> drained.

Beside the timeline, the loop's snapshot-to-live latency and whether the load a spec was built for still held while
it was live (:func:`flips_section`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from geokernel.contracts.outcome import OutcomeStatus
from local.outcomes import outcome
from local.report.utilisation import as_percent
from local.report.worker_load import WorkerLoad, live_spans
from local.state import RunState


def _fmt_t(state: RunState, t: float | None) -> str:
    return "-" if t is None else f"{t - state.started_at:7.1f}s"


def _epoch(iso: Any) -> float | None:
    try:
        return dt.datetime.fromisoformat(str(iso).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def built_from_windows(state: RunState) -> dict[int, float]:
    """Version -> end of the snapshot window (epoch s) the partitioner built it from."""
    out: dict[int, float] = {}
    for snap in state.live.get("snapshots", []):
        status, _, version = outcome(snap["result"])
        end = _epoch(snap["manifest"].get("window_end"))
        if status == OutcomeStatus.PUBLISHED and version is not None and end is not None:
            out[version] = end
    return out


def flip_times(state: RunState) -> list[tuple[int, float]]:
    """``(version, flipped_at)`` of every flip the observer saw (the control record's time)."""
    obs = state.observer
    if obs is None:
        return []
    return [(new, at) for _, new, _ in obs.flips if (at := obs.timeline(new).flipped_at) is not None]


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
        spec = obs.specs.get(new)
        # a relief of the surge fast path is built from the routers' signals, not from a snapshot window
        source = "relief" if spec is not None and "relief" in spec.source else "window"
        row = {"from": old, "to": new, "workers": tl.slots, "built_from": source, "window_end": end,
               "deploy_started_at": tl.deploy_started_at,
               "green_ready_at": tl.green_ready_at, "flipped_at": tl.flipped_at, "blue_drained_at": drained,
               "window_to_flip_s": latency, "built_for_max_utilisation": built_for.get(new),
               "measured_max_utilisation": measured, "statuses": tl.statuses}
        rows.append(row)
        lines.append(f"  {(f'v{old}' if old else 'start') + f'->v{new}':<10} {tl.slots:>7} {_fmt_t(state, end):>10} "
                     f"{_fmt_t(state, tl.deploy_started_at):>9} {_fmt_t(state, tl.green_ready_at):>9} "
                     f"{_fmt_t(state, tl.flipped_at):>9} {_fmt_t(state, drained):>13} "
                     f"{'-' if latency is None else f'{latency:.1f}s':>12} {as_percent(built_for.get(new)):>9} "
                     f"{as_percent(measured):>8}")
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
