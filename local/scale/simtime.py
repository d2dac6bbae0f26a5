"""A virtual clock that runs many threads one at a time: the scale simulation's :class:`~geo_service.adapters.timebase.Timebase`.

Every thread the simulation starts (worker main loops, heartbeat threads, carry-over threads, the router and
deployer actors) is a real Python thread, but only one runs at any moment: a thread runs until it waits (a
:class:`SimFlag` wait, a join, or :meth:`SimTime.sleep`), then the scheduler advances the clock to the earliest
wake-up and hands the turn to that thread. So a thousand workers run their own code, in order, on simulated
seconds that do not depend on how fast this machine is, and the AWS calls they make are counted per simulated
second.

Rules for code that runs under it: wait only through the timebase (``event().wait``, ``spawn(...).join``), never
``time.sleep`` or a lock held across a wait (the other threads do not run while one waits on a real primitive).
A real blocking call (an in-process moto request) simply takes wall time while the clock stands still.

Notes
-----
The order is deterministic: wake-ups at the same simulated time run in the order they were scheduled.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from local.errors import LocalRunError

log = logging.getLogger(__name__)

#: A thread that keeps the turn this long in wall time is stuck on something outside the simulated clock.
STALL_S = 120.0
#: Start of simulated time (2026-11-24T00:00:00Z): epoch seconds, so lease times look like real ones.
EPOCH = 1_795_478_400.0


class SimError(LocalRunError, RuntimeError):
    """The simulation cannot go on (a thread waited outside the timebase, or a thread failed)."""


@dataclass(eq=False)
class _Thread:
    name: str
    go: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    gen: int = 0  # bumped on every park: older heap entries of this thread are stale
    done: bool = False
    woke_by_flag: bool = False
    thread: threading.Thread | None = None


class SimTime:
    """The virtual clock and scheduler (see the module docstring).

    Parameters
    ----------
    start : float
        Epoch seconds at the start of the simulation.
    """

    def __init__(self, start: float = EPOCH) -> None:
        self.start = start
        self.now = start
        self._heap: list[tuple[float, int, int, _Thread]] = []
        self._seq = itertools.count()
        self._back = threading.Semaphore(0)
        self._local = threading.local()
        self._running: _Thread | None = None
        self.errors: list[str] = []
        self.switches = 0

    # ------------------------------------------------------------------ Timebase
    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now - self.start + 1000.0

    def event(self) -> SimFlag:
        return SimFlag(self)

    def spawn(self, target: Callable[[], object], name: str) -> SimTask:
        """Start ``target`` in a managed thread; it first runs at the current simulated time."""
        st = _Thread(name)
        task = SimTask(self, st)

        def body() -> None:
            st.go.acquire()
            self._local.thread = st
            try:
                target()
            except Exception as exc:  # a thread that dies must not stop the clock: record and go on
                self.errors.append(f"{name}: {type(exc).__name__}: {exc}")
                log.exception("simulated thread %s failed", name)
            finally:
                st.done = True
                task.finished.set()
                self._back.release()

        st.thread = threading.Thread(target=body, name=f"sim-{name}", daemon=True)
        st.thread.start()
        self._push(self.now, st)
        return task

    # ------------------------------------------------------------------ waiting (from a managed thread)
    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of simulated time."""
        self._park(max(0.0, seconds), None)

    def _current(self) -> _Thread:
        st: _Thread | None = getattr(self._local, "thread", None)
        if st is None or st is not self._running:
            raise SimError("a thread waited on the simulated clock without holding the turn (only threads started "
                           "with SimTime.spawn may wait on it)")
        return st

    def _park(self, timeout: float | None, flag: SimFlag | None) -> bool:
        st = self._current()
        st.gen += 1
        st.woke_by_flag = False
        if timeout is not None:
            heapq.heappush(self._heap, (self.now + timeout, next(self._seq), st.gen, st))
        if flag is not None:
            flag._waiters.append(st)
        self._back.release()
        st.go.acquire()
        return st.woke_by_flag

    def _push(self, at: float, st: _Thread) -> None:
        heapq.heappush(self._heap, (at, next(self._seq), st.gen, st))

    def _wake(self, st: _Thread) -> None:
        """Wake a thread parked on a flag now (its timer entry goes stale)."""
        st.gen += 1
        st.woke_by_flag = True
        self._push(self.now, st)

    # ------------------------------------------------------------------ driving (from the unmanaged main thread)
    def run_until(self, end: float) -> None:
        """Run every thread's turns due up to simulated time ``end`` (epoch s); the clock ends at ``end``."""
        while self._heap and self._heap[0][0] <= end:
            at, _seq, gen, st = heapq.heappop(self._heap)
            if gen != st.gen or st.done:
                continue
            self.now = max(self.now, at)
            self._running = st
            self.switches += 1
            st.go.release()
            if not self._back.acquire(timeout=STALL_S):
                frame = sys._current_frames().get(st.thread.ident or -1) if st.thread else None
                where = "".join(traceback.format_stack(frame)) if frame is not None else "?"
                raise SimError(f"simulated thread {st.name!r} held the turn for {STALL_S:g} s of wall time without "
                               f"waiting on the simulated clock; it is at:\n{where}")
            self._running = None
        self.now = max(self.now, end)

    def run_for(self, seconds: float) -> None:
        self.run_until(self.now + seconds)

    @property
    def threads_waiting(self) -> int:
        return sum(1 for _at, _seq, gen, st in self._heap if gen == st.gen and not st.done)


class SimFlag:
    """:class:`threading.Event` on the simulated clock."""

    def __init__(self, sim: SimTime) -> None:
        self._sim = sim
        self._set = False
        self._waiters: list[_Thread] = []

    def set(self) -> None:
        self._set = True
        waiters, self._waiters = self._waiters, []
        for st in waiters:
            if not st.done:
                self._sim._wake(st)

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until set or ``timeout`` simulated seconds passed; True when set."""
        if self._set:
            return True
        st = self._sim._current()
        self._sim._park(timeout, self)
        if st in self._waiters:  # woken by its timer: no longer waiting on the flag
            self._waiters.remove(st)
        return self._set


class SimTask:
    """A managed thread: :meth:`join` waits on simulated time."""

    def __init__(self, sim: SimTime, st: _Thread) -> None:
        self._sim = sim
        self._st = st
        self.finished = SimFlag(sim)

    @property
    def name(self) -> str:
        return self._st.name

    def join(self, timeout: float | None = None) -> None:
        if not self._st.done:
            self.finished.wait(timeout)

    def is_alive(self) -> bool:
        return not self._st.done
