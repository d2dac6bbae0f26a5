"""Swap timings measured by the local loop, as ``simulate``'s swap overlap.

The local loop's ``report.json`` holds ``swap_timings``: the medians, in seconds, of a worker
process's start (process spawned -> slot claimed), its warm-up (claimed -> ready) and the old
fleet's drain after a flip (flip -> drained), each with its number of samples. A swap keeps both
fleets for about ``start + warm-up + drain``; :func:`measured_swap` reads those three and gives
that sum as ``simulate --swap-timings REPORT``'s overlap.

Notes
-----
The local loop runs workers as local processes: their start is seconds where an ECS task's
(image pull, ENI attachment) is typically tens of seconds, so an overlap measured locally is a
lower bound for a deployed fleet. A timing with no sample (``null``) is an error, not a zero.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from partitioner.simulate.windows import SimulationError

#: The parts of a swap's overlap, as named in ``report.json`` ``swap_timings``.
PARTS = ("process_start_s", "warm_up_s", "drain_s")


@dataclass(frozen=True)
class MeasuredSwap:
    """A swap overlap measured by the local loop: its parts (seconds) and the file it came from."""

    process_start_s: float
    warm_up_s: float
    drain_s: float
    source: str

    @property
    def swap_s(self) -> float:
        return self.process_start_s + self.warm_up_s + self.drain_s

    def describe(self) -> str:
        return (f"measured by the local loop ({self.source}): start {self.process_start_s:.1f} s + warm-up "
                f"{self.warm_up_s:.1f} s + drain {self.drain_s:.1f} s")


def measured_swap(path: str) -> MeasuredSwap:
    """Read ``swap_timings`` from a local loop's ``report.json`` at ``path``.

    Raises
    ------
    SimulationError
        When the file cannot be read, is not JSON, has no ``swap_timings``, or one of :data:`PARTS`
        is missing, unmeasured (null) or not a finite number >= 0; the message names the file and field.
    """
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SimulationError(f"--swap-timings {path!r}: cannot read it ({exc.strerror})") from None
    except ValueError as exc:
        raise SimulationError(f"--swap-timings {path!r}: not JSON ({exc})") from None
    timings = doc.get("swap_timings") if isinstance(doc, dict) else None
    if not isinstance(timings, dict):
        raise SimulationError(f"--swap-timings {path!r}: no 'swap_timings' object (a local loop's report.json has one)")
    parts: dict[str, float] = {}
    for name in PARTS:
        value = timings.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise SimulationError(f"--swap-timings {path!r}: swap_timings.{name} is {value!r}, not a measured "
                                  "number of seconds >= 0")
        parts[name] = float(value)
    return MeasuredSwap(parts["process_start_s"], parts["warm_up_s"], parts["drain_s"], path)
