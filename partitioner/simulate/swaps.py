"""What a swap costs: both fleets run during the overlap of a redeploy.

A redeploy starts the new fleet before the flip (start + warm-up) and lets the old one drain
after it; ``swap_s`` is that overlap. Two ways to swap:

* ``whole``: every slot of the new version is a new process: the **whole new fleet** runs
  beside the old one for ``swap_s``;
* ``carry``: a slot in both versions carries over in its process, loading only the cells it
  gains: only the **new slots**, plus the **load that changes worker** (in worker-equivalents of
  the cap: its old owner drains it while its new owner loads it), run extra for ``swap_s``.

Cost is in worker-windows: extra workers x ``swap_s / window_s``.
"""

from __future__ import annotations

from dataclasses import dataclass

from geokernel.contracts.plan import SwapMode

SWAP_MODES = (SwapMode.WHOLE.value, SwapMode.CARRY.value)  # report order


@dataclass(frozen=True)
class Swap:
    """One flip from an old spec to a new one, measured under the load of the window it happened in."""

    t: int  # window of the flip
    old_version: int
    new_version: int
    old_workers: int
    new_workers: int
    new_slots: int  # worker ids of the new spec absent from the old one
    moved_share: float  # load changing (partition id, worker id): the stability definition
    changed_worker_load: float  # load changing worker, in worker-equivalents of the cap

    def extra_workers(self, mode: str) -> float:
        """Workers running beside the live fleet during the overlap."""
        if mode == "whole":
            return float(self.new_workers)
        if mode == "carry":
            return self.new_slots + self.changed_worker_load
        raise ValueError(f"unknown swap mode {mode!r}; choose from {', '.join(SWAP_MODES)}")

    def worker_windows(self, mode: str, swap_s: float, window_s: float) -> float:
        """The swap's extra cost in worker-windows."""
        return self.extra_workers(mode) * swap_s / window_s


def parse_modes(text: str) -> tuple[str, ...]:
    """``whole`` | ``carry`` | ``both`` -> the modes to account."""
    if text == "both":
        return SWAP_MODES
    if text in SWAP_MODES:
        return (text,)
    raise ValueError(f"--swap-mode {text!r}: choose whole, carry or both")
