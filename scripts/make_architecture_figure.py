"""Draw docs/img/architecture.png: the Geo Rebalancer loop as boxes and arrows (matplotlib only, no data read).

    .venv/bin/python scripts/make_architecture_figure.py [docs/img/architecture.png]

Three lanes: the top one measures the load and plans a spec (Spark job, snapshot, partitioner), the bottom one routes
and processes every event (router, the geo stream of each spec version, the geo workers, the enriched output), and the
middle one swaps to a new version (the spec, the deployer, the active version pointer) and carries the workers' cost
reports back to the partitioner. The boxes name what README.md and docs/ARCHITECTURE.md ("The loop") describe; when
the loop changes, change the boxes here and run the script again (1600 x 900 px).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch

OUT = Path(__file__).resolve().parents[1] / "docs" / "img" / "architecture.png"
WIDTH_IN, HEIGHT_IN, DPI = 16.0, 9.0, 100

#: Fill colour per kind of part (the legend names them).
KINDS = {
    "source": ("#eeeeee", "your producers"),
    "kinesis": ("#fde4c8", "Kinesis stream"),
    "compute": ("#d6e6f5", "compute: Spark job, ECS Fargate tasks"),
    "lambda": ("#fff2c2", "Lambda function"),
    "s3": ("#dcefd6", "S3 objects"),
    "dynamodb": ("#eadcf3", "DynamoDB item"),
}

#: Column x ranges and lane y centres, in figure inches (the axes span the whole figure, 1 unit = 1 inch).
COLS = {1: (0.3, 2.1), 2: (2.5, 4.5), 3: (5.2, 7.6), 4: (8.1, 10.5), 5: (11.0, 13.3), 6: (13.8, 15.7)}
LANES = {"top": 6.85, "mid": 4.4, "bottom": 1.95}
BOX_H = 1.45


@dataclass(frozen=True)
class Box:
    """A part of the loop: where it sits, its kind, its name and a line or two of what it does."""

    col: int
    lane: str
    kind: str
    title: str
    detail: str

    @property
    def x0(self) -> float:
        return COLS[self.col][0]

    @property
    def x1(self) -> float:
        return COLS[self.col][1]

    @property
    def y0(self) -> float:
        return LANES[self.lane] - BOX_H / 2

    @property
    def y1(self) -> float:
        return LANES[self.lane] + BOX_H / 2

    def side(self, where: str) -> tuple[float, float]:
        """A point on the box's edge: ``left``, ``right``, ``top``, ``bottom``, the middle of it or shifted along
        it by inches (``bottom+0.85``, ``top-0.75``)."""
        name, sign, amount = where.partition("+") if "+" in where else where.partition("-")
        shift = float(amount) * (1 if sign == "+" else -1) if amount else 0.0
        cx, cy = (self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2
        return {"left": (self.x0, cy + shift), "right": (self.x1, cy + shift),
                "top": (cx + shift, self.y1), "bottom": (cx + shift, self.y0)}[name]


BOXES = {
    "producers": Box(1, "mid", "source", "producers", "location events\n(JSON, or KPL-\naggregated)"),
    "ingest": Box(2, "mid", "kinesis", "ingest stream", "on-demand, or your\nown stream; partition\nkey: entity_id"),
    "spark": Box(3, "top", "compute", "aggregation job", "Spark on EMR Serverless\nor Glue: load per\nquadkey per window"),
    "snapshot": Box(4, "top", "s3", "load snapshot", "per window; its manifest,\nwritten last, triggers\nthe partitioner"),
    "partitioner": Box(5, "top", "lambda", "partitioner", "contiguous regions under\nthe cap, sticky ids;\npolicy: worth a redeploy?"),
    "pointer": Box(3, "mid", "dynamodb", "active version", "which spec the\nrouter routes by"),
    "deployer": Box(4, "mid", "lambda", "deployer", "a geo stream per version;\nstarts new slots, flips\nwhen all are leased + warm"),
    "spec": Box(5, "mid", "s3", "spec vN", "immutable: partitions,\nworker slots, shards"),
    "costs": Box(6, "mid", "s3", "cost reports", "CPU time per\nquadkey"),
    "router": Box(3, "bottom", "lambda", "router", "event -> partition of the\nactive spec -> explicit\nhash key of its shard"),
    "geo": Box(4, "bottom", "kinesis", "geo stream per version", "v1, v2, ...: shards per\nworker slot; the old one\ndrains, then the new"),
    "workers": Box(5, "bottom", "compute", "geo workers (Fargate)", "lease a slot, load only\nits region's data,\nrun the transform"),
    "output": Box(6, "bottom", "s3", "enriched output", "S3, by event hour;\nGlue table and\ndedupe view"),
}

#: (from, from side, to, to side, label, label offset (dx, dy), dashed, curvature)
ARROWS = [
    ("producers", "right", "ingest", "left", "", (0, 0), False, 0.0),
    ("ingest", "top", "spark", "left", "read every shard", (-0.55, 0.25), False, -0.25),
    ("ingest", "bottom", "router", "left", "read every shard", (-0.55, -0.25), False, 0.25),
    ("spark", "right", "snapshot", "left", "", (0, 0), False, 0.0),
    ("snapshot", "right", "partitioner", "left", "", (0, 0), False, 0.0),
    ("partitioner", "bottom", "spec", "top", "publish vN", (0.5, 0), False, 0.0),
    ("spec", "left", "deployer", "right", "", (0, 0), False, 0.0),
    ("deployer", "left", "pointer", "right", "flip", (0, 0.2), False, 0.0),
    ("pointer", "bottom", "router", "top", "read per\ninvocation", (0.62, 0), False, 0.0),
    ("deployer", "bottom", "geo", "top", "create vN", (0.5, 0), False, 0.0),
    ("deployer", "bottom+0.85", "workers", "top-0.75", "start / stop\nslots", (0.55, 0.05), False, 0.0),
    ("router", "right", "geo", "left", "", (0, 0), False, 0.0),
    ("geo", "right", "workers", "left", "", (0, 0), False, 0.0),
    ("workers", "right", "output", "left", "", (0, 0), False, 0.0),
    ("workers", "top", "costs", "bottom", "", (0, 0), True, -0.2),
    ("costs", "top", "partitioner", "right", "measured cost", (0.35, 0.25), True, 0.25),
]


def draw_box(ax: Axes, b: Box) -> None:
    fill = KINDS[b.kind][0]
    ax.add_patch(FancyBboxPatch((b.x0, b.y0), b.x1 - b.x0, b.y1 - b.y0, boxstyle="round,pad=0.02,rounding_size=0.12",
                                facecolor=fill, edgecolor="#4a4a4a", linewidth=1.3, zorder=2))
    cx = (b.x0 + b.x1) / 2
    ax.text(cx, b.y1 - 0.2, b.title, ha="center", va="top", fontsize=12.5, fontweight="bold", color="#1a1a1a", zorder=3)
    ax.text(cx, b.y1 - 0.55, b.detail, ha="center", va="top", fontsize=9.6, color="#333333", linespacing=1.25,
            zorder=3)


def draw_arrow(ax: Axes, a: tuple[str, str, str, str, str, tuple[float, float], bool, float]) -> None:
    src, s_side, dst, d_side, label, (dx, dy), dashed, rad = a
    p, q = BOXES[src].side(s_side), BOXES[dst].side(d_side)
    ax.add_patch(FancyArrowPatch(p, q, arrowstyle="-|>", mutation_scale=17, linewidth=1.6,
                                 color="#6a6a6a" if dashed else "#2f2f2f", linestyle=(0, (4, 3)) if dashed else "-",
                                 connectionstyle=f"arc3,rad={rad}", shrinkA=3, shrinkB=3, zorder=1))
    if label:
        mx, my = (p[0] + q[0]) / 2 + dx, (p[1] + q[1]) / 2 + dy
        ax.text(mx, my, label, ha="center", va="center", fontsize=9.4, style="italic", color="#3a3a3a", zorder=4,
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.9})


def figure() -> plt.Figure:
    fig = plt.figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, WIDTH_IN)
    ax.set_ylim(0, HEIGHT_IN)
    ax.axis("off")
    ax.text(0.35, 8.6, "Geo Rebalancer: the loop", fontsize=19, fontweight="bold", va="center")
    ax.text(0.35, 8.15, "top: measure the load and plan a spec   |   middle: swap to the new version   |   "
            "bottom: route and process every event", fontsize=11.5, color="#444444", va="center")
    for b in BOXES.values():
        draw_box(ax, b)
    for a in ARROWS:
        draw_arrow(ax, a)
    handles = [Patch(facecolor=fill, edgecolor="#4a4a4a", label=name) for fill, name in KINDS.values()]
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(0.012, 0.3 / HEIGHT_IN), ncol=6, fontsize=9.8,
              frameon=False, handlelength=1.6, columnspacing=1.8)
    ax.text(0.35, 0.78, "Locally (./scripts/run-local) the same parts run against moto on 127.0.0.1: Spark in local "
            "mode, the Lambda handlers in-process, the workers as local processes, each part signing as its "
            "synthesized IAM role.", fontsize=9.8, color="#555555", ha="left", va="center")
    return fig


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    fig = figure()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
