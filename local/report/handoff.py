"""The STATE HANDOFF section: how entity states moved between slots in the run, read where it happened.

Each worker logs one ``state_handoff`` line per step that moved states (:mod:`geo_service.process`): the states it
handed over, how long each entity it received had waited (first event held -> state here) and its handoff calls so
far per API; ``state_not_handed_over`` when it gave up waiting. The router's ledger reads and saves are counted by
the :class:`~lambdas.router.ledger.LedgerStore` of each of its execution environments in this process. Calls per
event are all of these over the events sent.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType


@dataclass
class HandoffStats:
    """What the workers' logs say about state handoff."""

    handed: int = 0
    waits: list[float] = field(default_factory=list)
    crossings: int = 0
    lost: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    router_reads: int = 0
    router_saves: int = 0

    def p(self, q: float) -> float:
        if not self.waits:
            return 0.0
        w = sorted(self.waits)
        return w[min(len(w) - 1, math.ceil(q * len(w)) - 1)]

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values()) + self.router_reads + self.router_saves


def read_stats(log_files: Iterable[Path], router: tuple[int, int] = (0, 0)) -> HandoffStats:
    """Sum the ``state_handoff`` lines of ``log_files`` (a process's calls are cumulative: its last line counts);
    ``router`` is the ledger's (reads, saves)."""
    stats = HandoffStats(router_reads=router[0], router_saves=router[1])
    last_calls: dict[str, dict[str, int]] = {}
    for path in log_files:
        for line in path.read_text(errors="replace").splitlines():
            if '"state_' not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("event") == "state_handoff":
                stats.handed += int(rec.get("handed", 0))
                stats.waits += [float(w) for w in rec.get("waits_s", [])]
                stats.crossings += int(rec.get("crossings", 0))
                last_calls[str(rec.get("owner"))] = {str(k): int(v) for k, v in rec.get("calls", {}).items()}
            elif rec.get("event") == "state_not_handed_over":
                stats.lost += 1
    for calls in last_calls.values():
        for api, n in calls.items():
            stats.calls[api] = stats.calls.get(api, 0) + n
    return stats


def router_ledger_calls(environments: Iterable[ModuleType]) -> tuple[int, int]:
    """The router ledger's (GetObject, PutObject) calls over its environments' handler modules (0 without state
    handoff, or for an environment that never ran)."""
    reads = saves = 0
    for module in environments:
        try:
            ledgers = module.runtime().ledgers
        except Exception:  # the router never ran in this environment (its configuration is not set)
            continue
        if ledgers is not None:
            reads, saves = reads + ledgers.reads, saves + ledgers.saves
    return reads, saves


def section(stats: HandoffStats, events: int) -> list[str]:
    """The report lines (nothing when no state moved and no call was made: a stateless run)."""
    if not stats.waits and not stats.handed and not stats.total_calls:
        return []
    per_event = stats.total_calls / events if events else 0.0
    calls = ", ".join(f"{api} {n}" for api, n in sorted(stats.calls.items()))
    return ["STATE HANDOFF (an entity's state follows it to its next slot: geo_service/handoff.py)",
            f"  states handed over {stats.handed}, received {len(stats.waits)} ({stats.crossings} across a region "
            f"border within a version, the rest across swaps); wait from the entity's first held "
            f"event to its state: p50 {stats.p(0.5):.2f}s, p99 {stats.p(0.99):.2f}s, max {max(stats.waits, default=0):.2f}s"
            f" (target p99 <= 2 s); given up {stats.lost}",
            f"  extra AWS calls: {stats.total_calls} ({calls}; router ledger GetObject {stats.router_reads}, "
            f"PutObject {stats.router_saves}) = "
            f"{per_event:.4f} per event sent ({events}) (target <= 0.01)"]
