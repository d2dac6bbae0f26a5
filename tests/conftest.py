"""Settings every test shares.

Hypothesis's per-example deadline (200 ms by default) is off: a property test checks answers, not speed (performance
lives in bench/), and on a loaded 2-core machine a correct example took 320 ms and failed the gate.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("gate", deadline=None)
settings.load_profile("gate")
