"""What one scale simulation is asked to do and what it measured: the config, the phases, the result and its report.

:class:`ScaleResult` holds every phase, the events routed / sent / out, the call log; :func:`summary` is what
``python -m local.scale`` prints and :func:`to_json` what it writes to ``result.json``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, NamedTuple

from geo_service.runtime.config import WorkerConfig
from geokernel.aws_budget.calls import CallLog
from geokernel.aws_budget.quotas import WARM_TABLE_ROWS, warm_table
from geokernel.aws_budget.report import BudgetRow, budget, failures, rates_per_api, render


class SteadyCalls(NamedTuple):
    """AWS calls per simulated second in the steady phase: all of them, and the state handoff's own."""

    total: float
    state: float


@dataclass(frozen=True)
class ScaleConfig:
    """What to simulate (the defaults are the fleet size the AWS budget is checked at: 1,000 slots, 100,000 events/s)."""

    workers: int = 1000
    events_per_s: float = 100_000.0
    #: Events per simulated second per worker put into moto for real (one router invocation in ``sample``).
    sent_per_worker_s: float = 5.0
    shards_per_worker: int = 1
    steady_s: float = 30.0
    #: Seconds from a raised desired count to a running task (Fargate's pull and start).
    launch_delay_s: float = 20.0
    phase_timeout_s: float = 900.0
    seed: int = 11
    out: Path = Path("out/scale")
    #: the stack's ``leases_warm_writes``: the leases table's writes are held against it (0: a new table's 4,000)
    leases_warm_writes: int = 0
    #: the stack's ``leases_warm_reads``: the leases table's reads are held against it (0: a new table's 12,000)
    leases_warm_reads: int = 0
    #: state handoff on (``--stateful``): ledgers in the router, a stateful transform in the workers
    stateful: bool = False


@dataclass
class Phase:
    """One step of the run, in simulated seconds from the start."""

    name: str
    start: float
    end: float = 0.0
    ok: bool = False
    detail: str = ""


@dataclass
class ScaleResult:
    """What one run measured."""

    config: ScaleConfig
    phases: list[Phase] = field(default_factory=list)
    slots: tuple[int, ...] = ()
    moved_shares: tuple[float, ...] = ()
    events_routed: int = 0
    events_sent: int = 0
    events_out: int = 0
    events_missing: int = 0
    tasks_started: int = 0
    wall_s: float = 0.0
    sim_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    calls: CallLog = field(default_factory=CallLog, repr=False)
    #: the simulated epoch second the run started at (phases count from it; the call log is in epoch seconds)
    sim_start: float = 0.0
    #: S3 PUTs of output objects per slot per second during the steady phase (target <= 0.1); None when no slot
    #: wrote two objects in it (records reach the slots too rarely: raise ``--sent-per-worker-s``)
    steady_output_puts: float | None = None
    #: AWS calls per simulated second in the steady phase: (all, the state handoff's own); None without that phase
    steady_calls: SteadyCalls | None = None

    #: the leases table's name (the scope of its writes in the call log)
    leases_table: str = ""

    def budget(self) -> list[BudgetRow]:
        writes, reads = WARM_TABLE_ROWS
        units = {writes: self.config.leases_warm_writes, reads: self.config.leases_warm_reads}
        warm = {(key, self.leases_table): warm_table(key, n) for key, n in units.items() if n and self.leases_table}
        return budget(self.calls, overrides=warm or None)

    def rates(self) -> dict[str, float]:
        """Every API's calls (or units) per simulated second over the whole run."""
        return rates_per_api(self.calls, max(1.0, self.sim_s))

    @property
    def ok(self) -> bool:
        return (all(p.ok for p in self.phases) and self.events_missing == 0 and not self.errors
                and not failures(self.budget()))


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [asdict(v) if is_dataclass(v) and not isinstance(v, type) else v for v in value]
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else value


def to_json(result: ScaleResult) -> dict[str, Any]:
    """``result.json``: every field of the result but the call log, the verdict, the budget rows and the rates."""
    d = {f.name: _plain(getattr(result, f.name)) for f in fields(result) if f.name != "calls"}
    d["config"] = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(result.config).items()}
    d["ok"] = result.ok
    d["budget"] = [{"key": r.key, "scope": r.scope, "scopes": r.scopes, "peak": r.peak, "sustained": r.sustained,
                    "total": r.total, "margin": r.margin, "ok": r.ok} for r in result.budget()]
    d["rates"] = result.rates()
    return d


def summary(result: ScaleResult) -> str:
    """The phases, the events, the budget table and the verdict, as printed by ``python -m local.scale``."""
    cfg = result.config
    lines = [f"scale simulation: {cfg.workers} slots (v1..v3: {', '.join(map(str, result.slots))}), "
             f"{cfg.events_per_s:,.0f} events/s routed, k={cfg.shards_per_worker}"]
    lines += [f"  {p.name:26} {'done' if p.ok else 'NOT DONE':9} t={p.start:6.0f}..{p.end:6.0f}s  {p.detail}"
              for p in result.phases]
    lines.append(f"  events routed {result.events_routed:,}; put into moto {result.events_sent:,}; "
                 f"in the output {result.events_out:,}; missing {result.events_missing}; "
                 f"tasks launched {result.tasks_started}")
    puts = result.steady_output_puts
    lines.append(f"  output objects in the steady phase: "
                 f"{'not measured (no slot wrote two)' if puts is None else f'{puts:.3f}'} S3 PUTs per slot per second "
                 f"(OUTPUT_FLUSH_S {WorkerConfig.output_flush_s:g} s; during a swap the old slots write every poll "
                 f"interval until they drain)")
    if result.steady_calls is not None:
        total, state = result.steady_calls
        per = 1.0 / max(1.0, cfg.events_per_s)
        lines.append(f"  AWS calls in the steady phase: {total:,.1f}/s, {total * per:.4f} per event routed; of them "
                     f"the state handoff's ledgers, state objects and handoff writes {state:,.1f}/s, "
                     f"{state * per:.4f} per event ({'state handoff on' if cfg.stateful else 'stateless'})")
    rows = result.budget()
    lines += ["", render(rows, f"AWS API budget at {cfg.workers} workers")]
    bad = failures(rows)
    lines += [f"  BELOW 2x: {b}" for b in bad]
    lines += [f"  error: {e}" for e in result.errors]
    lines.append(f"{'OK' if result.ok else 'FAILED'}: {result.sim_s:.0f} simulated s in {result.wall_s:.0f} s wall")
    return "\n".join(lines)
