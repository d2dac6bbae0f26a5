"""local.report.figures: the utilisation figure stays readable with many workers."""

from __future__ import annotations

from pathlib import Path

from local.output import OutRecord
from local.report.figures import plot_utilisation
from local.report.worker_load import Span, live_spans, measure

W = 10.0  # window, s
CAP = 10.0  # events per window


def _records(worker: str, version: int, per_window: dict[int, int], sent_offset_s: float = 0.0) -> list[OutRecord]:
    """``n`` records written in the middle of window ``i`` for each ``{i: n}``, sent ``sent_offset_s`` earlier."""
    out = []
    for i, n in per_window.items():
        written = int((i * W + W / 2) * 1000)
        out += [OutRecord(f"{worker}-{version}-{i}-{k}", version, worker, "p1", written - int(sent_offset_s * 1000),
                          written) for k in range(n)]
    return out


def test_figure_stays_readable_with_many_workers(tmp_path: Path) -> None:
    # GIVEN 24 workers over 12 windows, one of them over the cap once
    records = [r for w in range(24) for r in _records(f"w{w:04d}", 1 + w // 12, {i: 4 + (w + i) % 5
                                                                                   for i in range(12)})]
    records += _records("w0000", 1, {3: 8})
    load = measure(records, [], live_spans([(1, 0.0), (2, 65.0)]), Span(5.0, 115.0), W, CAP)
    # WHEN plotted THEN a PNG is written (tests/local cannot judge readability: look at it, see the README)
    path = plot_utilisation(load, [(1, 0.0), (2, 65.0)], tmp_path / "u.png", 0.0, "24 workers")
    assert path.stat().st_size > 20_000 and load.over_cap().over == 1
