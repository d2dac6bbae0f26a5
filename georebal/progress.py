"""Progress of long work: a line every few seconds (``replay: 12,000 sent, 1,000/s, eta 38 s``), on standard error
so that standard output keeps the result."""

from __future__ import annotations

import sys
from collections.abc import Callable

from georebal.smoke.clock import Clock, took

EVERY_S = 5.0

Say = Callable[[str], None]


def say_err(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Progress:
    """Counts what was done and says it at most every ``every_s`` seconds of ``clock``: the count, the rate since the
    last line and the time left, from ``fraction()`` (the share of the work done, 0..1; None: unknown)."""

    def __init__(self, label: str, clock: Clock, *, verb: str = "sent", every_s: float = EVERY_S,
                 fraction: Callable[[], float | None] = lambda: None, say: Say = say_err) -> None:
        self.label, self.clock, self.verb, self.every_s = label, clock, verb, every_s
        self.fraction, self.say = fraction, say
        self.count = 0
        self.started = clock.now()
        self._last_t, self._last_n = self.started, 0

    def add(self, n: int) -> None:
        """``n`` more done; a line when ``every_s`` went by since the last one."""
        self.count += n
        now = self.clock.now()
        if now - self._last_t >= self.every_s:
            self.say(self.line(now))
            self._last_t, self._last_n = now, self.count

    def line(self, now: float) -> str:
        rate = (self.count - self._last_n) / max(now - self._last_t, 1e-9)
        return f"{self.label}: {self.count:,} {self.verb}, {rate:,.0f}/s, eta {self.eta(now)}"

    def eta(self, now: float) -> str:
        done = self.fraction()
        if done is None or done <= 0:
            return "?"
        return took(max(0.0, (now - self.started) * (1 - min(done, 1.0)) / done))

    def elapsed(self) -> float:
        return self.clock.now() - self.started
