"""The report's SURGE section (``--surge``): the crowd, the routers' signals, the relief, and the time it took.

**Relief** is the first flip after the crowd's first event to a version in which the crowd's grid cell is no longer
on the worker that held it when the crowd came (moved, or split by entity hash), whichever path published it (a
relief of the fast path says so in its ``source``; the window path may get there first on a short window). The
target (issue #61): at most 60 s from the crowd's first event to that flip, and no worker-window above 110 % of the
cap (the run's own invariant, measured at the workers); the worst worker-window from the crowd's window on is
printed beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from geokernel.geo.tiles import tile
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Spec
from local.environment import GRID_ZOOM
from local.outcomes import outcome
from local.report.worker_load import WorkerLoad
from local.state import RunState

#: The most seconds from the crowd's first event to its relief live (issue #61)
RELIEF_TARGET_S = 60.0


@dataclass(frozen=True)
class Relief:
    """When the crowd came, when the first signal was processed, and the flip that relieved it."""

    began_at: float
    cell: str  # the crowd's grid cell, as a worker of each version holds it
    first_signal_at: float | None
    signals: int
    reliefs_published: tuple[int, ...]
    version: int | None  # the version that relieved it (None: none did)
    live_at: float | None
    by_fast_path: bool
    holder_before: str | None
    holder_after: str | None
    worst: float | None  # the worst worker-window from the crowd's window on

    @property
    def seconds(self) -> float | None:
        return None if self.live_at is None else self.live_at - self.began_at

    @property
    def ok(self) -> bool:
        return self.seconds is not None and self.seconds <= RELIEF_TARGET_S


def _holders(spec: Spec, lon: float, lat: float) -> tuple[str, ...]:
    """The workers holding the crowd's grid cell in ``spec`` (several when it is split by entity hash)."""
    t = tile(lon, lat, GRID_ZOOM)
    index = SpecIndex(spec)
    owner = int(index.catch_all_as_group(index.locate_groups_xy(np.array([t.x]), np.array([t.y]), GRID_ZOOM))[0])
    parts = [owner] if owner >= 0 else index.group_members(-owner - 1).tolist()
    return tuple(sorted({spec.partitions[int(i)].worker for i in parts}))


def relief_of(state: RunState, load: WorkerLoad) -> Relief | None:
    """The crowd's relief (None without ``--surge`` or before the crowd came)."""
    crowd, r, obs = state.crowd, state.replayer, state.observer
    began = getattr(r, "crowd_began_at", None)
    if crowd is None or began is None or obs is None:
        return None
    flips = sorted((at, new) for _, new, _ in obs.flips if (at := obs.timeline(new).flipped_at) is not None)
    live_then = [v for at, v in flips if at <= began]
    spec_then = obs.specs.get(live_then[-1]) if live_then else None
    held = _holders(spec_then, crowd.lon, crowd.lat) if spec_then is not None else ()
    version = live_at = None
    after: tuple[str, ...] = ()
    for at, v in flips:
        spec = obs.specs.get(v)
        if at <= began or spec is None:
            continue
        after = _holders(spec, crowd.lon, crowd.lat)
        if after != held:
            version, live_at = v, at
            break
    sigs = state.surge_invocations
    published = tuple(pv for inv in sigs if (o := outcome(inv.result))[0] == "published" and (pv := o[2]) is not None)
    worst = max((c.utilisation for c in load.cells() if c.start_s + load.window_s > began), default=None)
    t = tile(crowd.lon, crowd.lat, GRID_ZOOM)
    by_fast = version is not None and obs.specs.get(version) is not None and "relief" in obs.specs[version].source
    return Relief(began, f"{t.x},{t.y}@z{GRID_ZOOM}", min((inv.at for inv in sigs if inv.at >= began), default=None),
                  len(sigs), published, version, live_at, by_fast, ",".join(held) or None,
                  ",".join(after) if version is not None else None, worst)


def section(state: RunState, load: WorkerLoad) -> tuple[list[str], dict[str, Any] | None]:
    """The SURGE lines and their JSON (nothing without ``--surge``)."""
    crowd = state.crowd
    if crowd is None:
        return [], None
    rel = relief_of(state, load)
    cfg = state.config
    head = (f"SURGE (--surge: an undeclared crowd of {crowd.rate_per_s:.1f} events/s, "
            f"{100 * crowd.rate_per_s * cfg.window_s / cfg.cap:.0f}% of the cap, at {crowd.name}, ramping up over "
            f"{crowd.ramp_s:g}s; relief = the first flip to a version with the crowd's cell off its worker)")
    if rel is None:
        return ["", head, "  the crowd never came (the replay ended before it)"], None
    t0 = state.started_at
    lines = ["", head,
             f"  crowd's first event at {rel.began_at - t0:.1f}s; its grid cell {rel.cell} on {rel.holder_before or '-'}",
             f"  surge signals processed by the partitioner: {rel.signals}"
             + (f", the first at {rel.first_signal_at - t0:.1f}s ({rel.first_signal_at - rel.began_at:.1f}s after the "
                f"crowd's first event)" if rel.first_signal_at is not None else "")
             + (f"; reliefs published: {', '.join(f'v{v}' for v in rel.reliefs_published)}" if rel.reliefs_published
                else "; no relief published")]
    if rel.seconds is None or rel.live_at is None:
        lines.append("  RELIEF: none went live before the run ended")
    else:
        lines.append(f"  RELIEF: v{rel.version} ({'the fast path' if rel.by_fast_path else 'the window path'}) live at "
                     f"{rel.live_at - t0:.1f}s, the cell on {rel.holder_after}: {rel.seconds:.1f}s from the crowd's "
                     f"first event (target <= {RELIEF_TARGET_S:g}s: {'met' if rel.ok else 'MISSED'})")
    lines.append(f"  worst worker-window from the crowd's window on: "
                 f"{'-' if rel.worst is None else f'{100 * rel.worst:.0f}%'} (at most 110% is the run's invariant)")
    doc = {"began_at": rel.began_at, "cell": rel.cell, "signals": rel.signals,
           "first_signal_at": rel.first_signal_at, "reliefs_published": list(rel.reliefs_published),
           "relief_version": rel.version, "relief_live_at": rel.live_at, "by_fast_path": rel.by_fast_path,
           "seconds_to_relief": rel.seconds, "target_s": RELIEF_TARGET_S, "met": rel.ok,
           "worst_after": rel.worst}
    return lines, doc
