"""Report sections about specs: partition tables, the old-spec-under-new-load comparisons, spec files, maps.

For every spec version the run published it writes ``specs/v<N>.json`` (the spec as
published) and ``specs/v<N>.geojson`` (:mod:`partitioner.output.geojson`), prints the partition
table, and for every snapshot the partitioner saw it prints the *allocation mismatch*
comparison that motivates rebalancing: the spec that was live, under the new load (its
*mismatch*, the highest worker utilisation, e.g. "264%": the capacity a static partitioning
would need to survive the shift), against the spec rebuilt from that load, or why the
policy declined to publish one. These are **the snapshot's estimates** of the load (what
the partitioner saw), not what the workers processed: the report leads with the latter
(:mod:`local.report.worker_load`). Maps of the partitions before and after each flip come
from :mod:`partitioner.output.plot`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from local.outcomes import outcome
from local.state import RunState


def snapshot_counts(snap: dict[str, Any]) -> Any:
    """Return the snapshot's load as :class:`partitioner.load.counts.Counts` (same reader as the partitioner)."""
    from partitioner.load.read import read_snapshot_rows

    return read_snapshot_rows(snap["rows_text"], snap["key"])


def comparison_lines(state: RunState) -> tuple[list[dict[str, Any]], dict[int, Any], list[str]]:
    """Per snapshot: the live spec under the new load (its mismatch) vs the spec rebuilt from it.

    Returns the JSON rows, the counts each published version was built from, and the lines.
    """
    from partitioner.output.compare import spec_diff, stability
    from partitioner.output.metrics import evaluate
    from partitioner.output.render import render_stability, render_table, summary_line

    obs = state.observer
    specs = obs.specs if obs else {}
    deployed = {new for _, new, _ in (obs.flips if obs else [])}
    rows: list[dict[str, Any]] = []
    built_from: dict[int, Any] = {}
    lines = ["THE SNAPSHOT'S ESTIMATE: OLD SPEC UNDER NEW LOAD vs REBUILT SPEC (per snapshot, as the partitioner saw it, "
             "not measured at the workers; mismatch = busiest worker's % of its cap)"]
    details: list[str] = []
    live: int | None = None
    for snap in state.live.get("snapshots", []):
        window = snap["manifest"].get("window_end", snap["key"])
        status, reason, new_v = outcome(snap["result"])
        if snap["error"]:
            lines.append(f"  {window}: partitioner error: {snap['error']}")
            rows.append({"window_end": window, "error": snap["error"]})
            continue
        counts = snapshot_counts(snap)
        row: dict[str, Any] = {"window_end": window, "total_load": counts.total, "status": status}
        old_m = evaluate(specs[live], counts) if live is not None and specs.get(live) else None
        if old_m is not None:
            row |= {"old_version": live, "old_mismatch": old_m.mismatch, "old_workers": old_m.worker_count}
        old_txt = (f"v{live} under this load {100 * old_m.mismatch:.0f}% on {old_m.worker_count} workers"
                   if old_m else "no live spec")
        if status == "published" and new_v is not None and specs.get(new_v) is not None:
            new_m = evaluate(specs[new_v], counts)
            built_from[new_v] = counts
            row |= {"new_version": new_v, "new_mismatch": new_m.mismatch, "new_workers": new_m.worker_count,
                    "published": True}
            lines.append(f"  {window}: load {counts.total:g}; {old_txt} -> rebuilt v{new_v} "
                         f"{100 * new_m.mismatch:.0f}% on {new_m.worker_count} workers: PUBLISHED")
            if old_m is not None and live is not None and new_v in deployed:
                st = stability(specs[live], specs[new_v], counts)
                row["kept_share"] = st.kept_share
                details += ["", f"--- v{live} under the load that triggered v{new_v}, which went live "
                                f"(the mismatch: the old partitions under the new load) ---",
                            render_table(old_m, limit=12), "",
                            f"--- rebuilt v{new_v} under the same load ---", summary_line(new_m),
                            render_stability(st, spec_diff(specs[live], specs[new_v]))]
            live = new_v
        else:
            verdict = "DECLINED by the policy" if status == "held" else status.upper()
            lines.append(f"  {window}: load {counts.total:g}; {old_txt} -> {verdict}: {reason}")
            row |= {"published": False, "declined": reason if status == "held" else "", "reason": reason}
        rows.append(row)
    return rows, built_from, [*lines, *details]


def write(state: RunState) -> tuple[dict[str, Any], list[str], list[Path]]:
    """Write spec JSON/GeoJSON and partition maps; return (report JSON, report lines, figure paths)."""
    cfg = state.config
    obs = state.observer
    specs = {v: s for v, s in (obs.specs.items() if obs else []) if s is not None}
    out_dir = cfg.out / "specs"
    out_dir.mkdir(parents=True, exist_ok=True)
    from partitioner.output import geojson
    from partitioner.output.metrics import evaluate
    from partitioner.output.render import render_table, summary_line

    rows, built_from, cmp_lines = comparison_lines(state)
    deployed = {new for _, new, _ in (obs.flips if obs else [])}
    lines = ["PARTITION TABLES (each published spec under the snapshot it was built from; full tables for the "
             "versions that went live)"]
    doc: dict[str, Any] = {"versions": {}, "comparisons": rows}
    for v in sorted(specs):
        spec = specs[v]
        (out_dir / f"v{v}.json").write_text(spec.to_json())
        geojson.write_geojson(spec, out_dir / f"v{v}.geojson", built_from.get(v))
        entry = {"partitions": len(spec.partitions), "workers": len(spec.workers), "total_load": spec.total_load,
                 "json": f"specs/v{v}.json", "geojson": f"specs/v{v}.geojson"}
        if v in built_from:
            m = evaluate(spec, built_from[v])
            entry["metrics"] = m.to_dict()
            if v in deployed:
                lines += ["", render_table(m, limit=20)]
            else:
                lines += ["", f"Spec v{v} (published, superseded before it was deployed): "
                              + summary_line(m).replace("\n", " | ")]
        elif isinstance(spec.source.get("relief"), dict | Mapping):
            relief = spec.source["relief"]
            lines += ["", f"Spec v{v}: {len(spec.partitions)} partitions on {len(spec.workers)} workers (a relief of "
                          f"the fast path on v{spec.previous_version}: {', '.join(relief.get('cells', ()))} moved off "
                          f"{relief.get('worker')}, signalled under v{relief.get('measured_under')})"]
        else:
            lines += ["", f"Spec v{v}: {len(spec.partitions)} partitions on {len(spec.workers)} workers "
                          "(its snapshot was not seen by this run)"]
        doc["versions"][v] = entry
    figures = _maps(state, specs, built_from)
    return doc, ["", *cmp_lines, "", *lines], figures


def _maps(state: RunState, specs: dict[int, Any], built_from: dict[int, Any]) -> list[Path]:
    """Partition maps (:mod:`partitioner.output.plot`): each published spec under the load it was built
    from, and for each rebalance the old spec under the new load (map and mismatch bars)."""
    from partitioner.output import plot

    out = state.config.out
    figures = []
    previous: int | None = None
    for v in sorted(specs):
        counts = built_from.get(v)
        figures.append(plot.plot_spec(specs[v], out / f"partitions_v{v}.png", counts,
                                      title=f"spec v{v}: {len(specs[v].workers)} workers (cap {specs[v].max_load:g})"))
        if previous is not None and counts is not None:
            figures.append(plot.plot_spec(specs[previous], out / f"partitions_v{previous}_under_v{v}_load.png", counts,
                                          title=f"old spec v{previous} under the load that triggered v{v}"))
            figures.append(plot.plot_mismatch(specs[previous], counts, out / f"mismatch_v{previous}_to_v{v}.png",
                                              title=f"v{previous} planned vs the new load (rebuilt as v{v})"))
        previous = v
    return [Path(f) for f in figures]
