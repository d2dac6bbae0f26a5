"""The controller the partitioner Lambda and the simulator both run: one step per snapshot window.

:func:`control_step` takes the snapshot that just closed, the live (latest published) spec and the
controller's :class:`ControlState`, and returns the next state, the :class:`~partitioner.control.policy.Decision`
and, when the decision is to redeploy, the spec to publish. The caller persists the state (the
Lambda in S3, the simulator in memory), publishes, and then records the publish with
:meth:`ControlState.published`.

Two policies, chosen by :class:`ControlSettings` (``POLICY_JSON`` in the Lambda):

* ``"predictive"`` (default, :class:`partitioner.control.predictive.PredictivePolicy`): forecast the load
  for when a new fleet would go live, headroom from the observed forecast error, build only
  when a predicted overload or waste triggers;
* ``"reactive"`` (:class:`partitioner.control.policy.RebalancePolicy`): build on the snapshot every
  window, watermarks, cooldown and minimum change judged on the snapshot.

Both keep the load history up to date, so switching policies never starts from nothing.

``POLICY_JSON`` is one flat JSON object: ``mode``, ``latency_s`` (snapshot-to-live seconds to use
until the deploy controller has measured some; default one window), the reactive policy's keys
(``high_watermark``, ``low_watermark``, ``max_waste_ratio``, ``cooldown_s``, ``min_change``,
``target_fill``) and the predictive policy's (:class:`~partitioner.control.predictive.PredictivePolicy`).
Unknown keys and bad values raise :class:`~geokernel.errors.PolicyError` naming them.

Declared crowds (:mod:`partitioner.control.crowds`) are not part of ``POLICY_JSON``: the Lambda reads them from the
specs bucket every window and ``simulate`` from ``--crowds``, and both hand them over as
:attr:`ControlSettings.crowds`. Either policy then sizes for them while they overlap the interval the next spec
would serve.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any

from geokernel.errors import PolicyError
from geokernel.partition_spec.model import Spec
from partitioner.control.crowds import DeclaredCrowd, reserve
from partitioner.control.forecast import LoadHistory
from partitioner.control.levels import CellLevels
from partitioner.control.policy import Decision, RebalancePolicy, policy_object
from partitioner.control.predictive import BuildFn, Observation, PredictivePolicy
from partitioner.load.counts import Counts
from partitioner.load.loads import LoadMetrics, cells_of, load_metrics

MODES = ("predictive", "reactive")
STATE_FORMAT = "geo-rebalancer.control-state/1"


@dataclass(frozen=True)
class ControlSettings:
    """Which policy runs, with its settings, the latency to assume before one is measured, and declared crowds.

    ``crowds`` is not read from or written to ``POLICY_JSON`` (see the module docstring).
    """

    mode: str = "predictive"
    latency_s: float | None = None
    reactive: RebalancePolicy = field(default_factory=RebalancePolicy)
    predictive: PredictivePolicy = field(default_factory=PredictivePolicy)
    crowds: tuple[DeclaredCrowd, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise PolicyError(f"policy mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        v = self.latency_s
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                              or v < 0):
            raise PolicyError(f"policy latency_s must be a number >= 0, got {v!r}")

    @classmethod
    def from_json(cls, text: str | None, where: str = "POLICY_JSON") -> ControlSettings:
        """Parse the flat ``POLICY_JSON`` object (empty -> defaults); see the module docstring."""
        reactive_keys = {f.name for f in fields(RebalancePolicy)}
        predictive_keys = {f.name for f in fields(PredictivePolicy)}
        data = policy_object(text, where, {"mode", "latency_s"} | reactive_keys | predictive_keys)
        if data is None:
            return cls()
        try:
            return cls(mode=data.get("mode", "predictive"), latency_s=data.get("latency_s"),
                       reactive=RebalancePolicy(**{k: v for k, v in data.items() if k in reactive_keys}),
                       predictive=PredictivePolicy(**{k: v for k, v in data.items() if k in predictive_keys}))
        except PolicyError as exc:
            raise PolicyError(f"{where}: {exc}") from exc

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, **({"latency_s": self.latency_s} if self.latency_s is not None else {}),
                **self.reactive.to_dict(), **self.predictive.to_dict()}

    def to_json(self) -> str:
        """The flat ``POLICY_JSON`` object (round trip with :meth:`from_json`)."""
        return json.dumps(self.to_dict(), sort_keys=True)


@dataclass(frozen=True, eq=False)
class ControlState:
    """What the controller remembers between windows: load history per region, levels per cell, last publish."""

    history: LoadHistory | None = None
    levels: CellLevels | None = None
    last_published_at: float | None = None

    def published(self, at: float) -> ControlState:
        """The state after a spec was published at ``at`` (epoch s)."""
        return ControlState(self.history, self.levels, float(at))

    def to_dict(self) -> dict[str, Any]:
        return {"format": STATE_FORMAT, "last_published_at": self.last_published_at,
                "history": None if self.history is None else self.history.to_dict(),
                "levels": None if self.levels is None else self.levels.to_dict()}

    def to_bytes(self) -> bytes:
        """UTF-8 JSON (round trip with :meth:`from_bytes`)."""
        return json.dumps(self.to_dict(), separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "controller state") -> ControlState:
        """Parse :meth:`to_bytes` output; raise :class:`PolicyError` naming ``where`` and the bad field."""
        try:
            d = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise PolicyError(f"{where}: not UTF-8 JSON ({exc})") from None
        if not isinstance(d, dict) or d.get("format") != STATE_FORMAT:
            raise PolicyError(f"{where}: not a {STATE_FORMAT} object: {str(d)[:80]!r}")
        last = d.get("last_published_at")
        if last is not None and (isinstance(last, bool) or not isinstance(last, (int, float))):
            raise PolicyError(f"{where}: last_published_at must be a number or null, got {last!r}")
        hist, levels = d.get("history"), d.get("levels")
        return cls(None if hist is None else LoadHistory.from_dict(hist, f"{where} history"),
                   None if levels is None else CellLevels.from_dict(levels, f"{where} levels"),
                   None if last is None else float(last))


def _reactive(settings: ControlSettings, state: ControlState, snapshot: Counts, interval: tuple[float, float],
              window_s: float, now: float, current: Spec | None, build: BuildFn) -> tuple[Decision, Spec | None]:
    """The reactive policy's decision on the snapshot (with room for declared crowds over ``interval``), and the
    spec to publish if it says redeploy."""
    sized, crowds = reserve(snapshot, settings.crowds, *interval, window_s)
    candidate = build(sized, settings.reactive.target_fill)
    last = state.last_published_at
    decision = settings.reactive.decide(current, candidate, sized, datetime.fromtimestamp(now, UTC),
                                        None if last is None else datetime.fromtimestamp(last, UTC))
    if crowds:
        decision = replace(decision, reasons=(*decision.reasons,
                                              f"sized for declared crowds: {', '.join(c.name for c in crowds)}"))
    return decision, candidate if decision.redeploy else None


@dataclass(frozen=True, eq=False)
class Step:
    """One controller step: the next state, the decision, and the spec to publish if it says redeploy."""

    state: ControlState
    decision: Decision
    candidate: Spec | None
    observed: LoadMetrics | None  # the live spec under the snapshot itself (None on cold start)
    latency_s: float


def control_step(settings: ControlSettings, state: ControlState, snapshot: Counts, *, window_end: float,
                 window_s: float, now: float, current: Spec | None, max_load: float, build: BuildFn,
                 latency_s: float | None = None, events: Counts | None = None) -> Step:
    """Absorb the snapshot into the history, then decide with the configured policy.

    Parameters
    ----------
    snapshot : Counts
        The window that just closed (weights in the same units as ``max_load``).
    window_end, window_s : float
        Its end (epoch s) and length.
    now : float
        Decision time (epoch s; the reactive policy's cooldown counts from the last publish).
    current : Spec or None
        The latest published spec (None on cold start: the first spec is always published).
    build : callable
        ``build(counts, fill) -> Spec``: the partitioner's build with everything else bound
        (previous spec, version, stream name, ``max_load``).
    latency_s : float, optional
        Measured snapshot-to-live seconds; else ``settings.latency_s``, else one window.
    events : Counts, optional
        The window's plain event counts when ``snapshot`` is weighted by cost rates: the history
        follows events, so a rate that appears or changes is not read as a surge (default: the snapshot).

    Returns
    -------
    Step

    Raises
    ------
    BuildError
        When the builder cannot build from this snapshot.
    """
    p = settings.predictive
    cells = cells_of(snapshot)
    plain = events if events is not None else snapshot
    grid = plain.grid()
    zoom = p.region_zoom(grid.zoom)
    history = state.history
    if history is None or history.region_zoom != zoom:
        history = LoadHistory.empty(zoom, window_s)
    history = history.absorb(cells_of(plain), window_end, window_s, int(p.history_windows))
    levels = state.levels if state.levels is not None and state.levels.zoom == grid.zoom else \
        CellLevels.empty(grid.zoom)
    levels = levels.update((grid.x << grid.zoom) | grid.y, grid.weight, alpha=p.cell_alpha, jump_z=p.cell_jump_z,
                           rise_z=p.cell_rise_z, growth=history.growth(grid.zoom))
    new_state = ControlState(history, levels, state.last_published_at)
    latency = latency_s if latency_s is not None else settings.latency_s if settings.latency_s is not None \
        else window_s
    observed = load_metrics(current, cells) if current is not None else None
    if settings.mode == "reactive":
        decision, candidate = _reactive(settings, state, snapshot, (window_end + latency, window_end + latency + window_s),
                                        window_s, now, current, build)
        return Step(new_state, decision, candidate, observed, latency)
    weighted = grid if events is None or events is snapshot else snapshot.grid()
    verdict = p.decide(current, Observation(snapshot, cells, weighted, grid, history, levels, settings.crowds),
                       window_end=window_end, latency_s=latency, max_load=max_load, build=build)
    return Step(new_state, verdict.decision, verdict.candidate, observed, latency)
