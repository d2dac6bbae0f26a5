"""The worker's view of time and of its own threads, injectable so a simulation can run it on a virtual clock.

Every wait, timer and background thread of the worker goes through a :class:`Timebase`:

* ``time()`` epoch seconds (lease times, caught-up times compared with Kinesis arrival stamps, output keys),
* ``monotonic()`` seconds for intervals and deadlines,
* ``event()`` a flag with ``set``/``is_set``/``wait(timeout)`` (a :class:`threading.Event` here),
* ``spawn(target, name)`` a started background thread with ``join(timeout)``/``is_alive()``.

:data:`SYSTEM` is the real one. The scale simulation (``local.scale``) supplies a virtual one that runs every
thread of a thousand in-process workers one at a time on a simulated clock, so their AWS calls are counted per
simulated second on the worker's own code paths.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol


class Flag(Protocol):
    """What the worker uses of :class:`threading.Event`."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class Task(Protocol):
    """What the worker uses of :class:`threading.Thread` once started."""

    def join(self, timeout: float | None = None) -> None: ...

    def is_alive(self) -> bool: ...


class Timebase(Protocol):
    """Clocks, flags and background threads (see the module docstring)."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...

    def event(self) -> Flag: ...

    def spawn(self, target: Callable[[], object], name: str) -> Task: ...


class SystemTimebase:
    """Real time and real daemon threads."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def event(self) -> Flag:
        return threading.Event()

    def spawn(self, target: Callable[[], object], name: str) -> Task:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        return thread


SYSTEM: Timebase = SystemTimebase()
