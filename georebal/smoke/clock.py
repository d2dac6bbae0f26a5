"""The smoke run's clock: wall-clock seconds and sleeping, behind a protocol so tests pass a fake one that jumps."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Epoch seconds (event times and log searches are in epoch milliseconds)."""
        ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """:func:`time.time` and :func:`time.sleep`."""

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def took(seconds: float) -> str:
    """``7 min 12 s`` / ``45 s``."""
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60} s" if whole >= 60 else f"{whole} s"
