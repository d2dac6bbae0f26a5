"""Text for people: the partition table, summaries and spec diffs (what the CLI prints).

Pure formatting of what :mod:`partitioner.output.metrics` and :mod:`partitioner.output.compare` measured;
nothing here computes a metric.

Words: **load** is the counts' weight (events per snapshot window, or cost-weighted events
when the workers' cost reports are known); the **cap** is the spec's ``max_load``, the
most load one **worker** may carry; a worker runs one or more **partitions**. Percentages
are of the cap.

Notes
-----
* Loads print with the decimals they need (2.5 stays 2.5; 1,234.4 prints as 1234),
  see :func:`fmt_load`; a measure that does not exist (no regions, no load) prints ``-``,
  never ``nan``.
"""

from __future__ import annotations

import math

from partitioner.output.compare import SpecDiff, Stability
from partitioner.output.metrics import SpecMetrics


def fmt_load(v: float) -> str:
    """A load with the decimals it needs: none from 100 up, at most 1 from 10, at most 2 below; ``-`` if not finite."""
    if not math.isfinite(v):
        return "-"
    digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2
    text = f"{v:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _pct(v: float) -> str:
    return f"{100.0 * v:.1f}%" if math.isfinite(v) else "-"


def _mismatched(m: SpecMetrics) -> bool:
    tol = 1e-6 * max(1.0, m.max_load)
    return any(abs(p.load - p.planned_load) > tol for p in m.partitions)


def render_table(m: SpecMetrics, *, limit: int | None = 40) -> str:
    """Return the partition table (load and % of the cap per partition), the worker table and a summary.

    When the evaluated load differs from what the spec recorded (an old spec under new
    load), partition lines read ``load planned -> load (x% of the cap)``. ``limit`` caps
    the partition and worker lines (hottest first beyond it; the rest are summarised).
    """
    mismatch = _mismatched(m)
    lines = [f"Spec v{m.version} ({m.strategy or 'unknown strategy'}) under {m.source} (grid zoom {m.grid_zoom})",
             f"Total partitions: {m.region_count} (+ catch-all)",
             f"Cap (max load per worker): {fmt_load(m.max_load)}", ""]
    parts = list(m.partitions)
    shown = parts if limit is None or len(parts) <= limit else sorted(parts, key=lambda p: -p.load)[:limit]
    shown_ids = {p.id for p in shown}
    for p in parts:
        if p.id not in shown_ids:
            continue
        tag = " catch-all" if p.is_catch_all else (f" share {p.share:.3f}" if p.share < 1.0 else "")
        if mismatch:
            lines.append(f"Partition {p.id} [{p.worker}]: load {fmt_load(p.planned_load):>9} -> "
                         f"{fmt_load(p.load):>9} ({_pct(p.utilisation)} of the cap){tag}")
        else:
            lines.append(f"Partition {p.id} [{p.worker}]: load {fmt_load(p.load):>9} ({_pct(p.utilisation)} of the cap)"
                         f"{tag}")
    rest = [p for p in parts if p.id not in shown_ids]
    if rest:
        lines.append(f"... {len(rest)} more partitions, each with a load of at most {fmt_load(max(p.load for p in rest))}")
    lines += ["", f"{'worker':<8}{'planned':>11}{'load':>11}{'% of cap':>10}  partitions"]
    workers = list(m.workers)
    wshown = workers if limit is None or len(workers) <= limit else sorted(workers, key=lambda w: -w.load)[:limit]
    for w in wshown:
        ids = ",".join(w.partitions[:4]) + (f",+{len(w.partitions) - 4}" if len(w.partitions) > 4 else "")
        lines.append(f"{w.id:<8}{fmt_load(w.planned_load):>11}{fmt_load(w.load):>11}{_pct(w.utilisation):>10}  {ids}")
    if len(wshown) < len(workers):
        lines.append(f"... {len(workers) - len(wshown)} more workers")
    lines += ["", summary_line(m)]
    if mismatch and m.over_max:
        worst = ", ".join(f"{w.id} {_pct(w.utilisation)}" for w in m.over_max[:5])
        lines.append(f"Over the cap under this load: {len(m.over_max)} worker(s): {worst}")
    return "\n".join(lines)


def summary_line(m: SpecMetrics) -> str:
    """A three-line summary: workers vs lower bound, load per worker, contiguity, shape, boundary load, regions per
    worker and the spec's size."""
    contig = "yes" if m.contiguous else f"NO ({', '.join(m.non_contiguous[:5])})"
    compact = f"{m.median_compactness:.2f}" if math.isfinite(m.median_compactness) else "-"
    ratio = f"{m.waste_ratio:.2f}" if math.isfinite(m.waste_ratio) else "-"
    median_regions, max_regions = m.regions_per_worker
    return (f"Workers: {m.worker_count} (lower bound {m.lower_bound}, ratio {ratio}) | "
            f"load per worker, % of the cap: max {_pct(m.max_utilisation)}, mean {_pct(m.mean_utilisation)}, "
            f"median {_pct(m.median_utilisation)}\n"
            f"Contiguous: {contig} | median P^2/(4piA): {compact} | "
            f"boundary-load share: {_pct(m.boundary_load_share)} | total load {fmt_load(m.total)}\n"
            f"Regions: {m.region_count:,}, per worker median {median_regions:g}, max {max_regions}"
            + (f" | spec {m.spec_bytes / 1e6:.2f} MB of JSON" if m.spec_bytes else ""))


def render_stability(s: Stability, d: SpecDiff | None = None) -> str:
    """Text for ``diff``: ids added/removed/changed and the load that keeps its partition and worker."""
    lines: list[str] = []
    if d is not None:
        def ids(v: tuple[str, ...]) -> str:
            return ", ".join(v[:12]) + (f" (+{len(v) - 12} more)" if len(v) > 12 else "") if v else "-"
        lines += [f"partitions added ({len(d.added)}): {ids(d.added)}",
                  f"partitions removed ({len(d.removed)}): {ids(d.removed)}",
                  f"partitions changed ({len(d.changed)}): {ids(d.changed)}",
                  f"partitions unchanged: {len(d.unchanged)}",
                  f"workers added ({len(d.workers_added)}): {ids(d.workers_added)}",
                  f"workers removed ({len(d.workers_removed)}): {ids(d.workers_removed)}"]
    lines.append(f"v{s.old_version} -> v{s.new_version}: {_pct(s.kept_share)} of load keeps its partition and "
                 f"worker; moved {fmt_load(s.moved_load)} of {fmt_load(s.total)} ({_pct(s.moved_share)})")
    return "\n".join(lines)
