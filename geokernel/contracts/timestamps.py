"""The time unit rule of an event's ``ts``: the units, how ``auto`` tells them apart, which times are plausible.

The setting is ``ts_unit`` (:data:`TS_UNIT_SETTING`), one of :class:`TsUnit`; it travels in the event field
mapping (:class:`geokernel.contracts.event_fields.EventFields`: ``EVENT_FIELDS``, context ``event_fields``,
``--event-fields``), default ``auto``. :func:`geokernel.timestamps.read_ts` applies the rule to one value (the
router, the workers, and every reason ``partitioner counts`` gives); the Spark job (``glue_jobs/timestamps.py``,
column expressions) and ``partitioner counts`` (``partitioner/load/eventtimes.py``, NumPy arrays) apply the same
constants from here; ``tests/events/ts_units.json`` is the one table all of them are tested against
(``docs/CONTRACTS.md``, "Events").

Notes
-----
* **Units.** ``s``, ``ms``, ``us``: ``ts`` is an epoch number in that unit (a JSON number, or the same number
  as text: :data:`EPOCH_NUMBER_TEXT`); ISO-8601 text is refused. ``iso``: ``ts`` is ISO-8601 text; a number is
  refused. ``auto``: a number is read in the unit its magnitude gives (:data:`AUTO_UNIT_BELOW`: below ``1e11``
  seconds, below ``1e14`` milliseconds, else microseconds), ISO-8601 text is parsed.
* **Why those bounds.** A plausible time (:data:`TS_WINDOW`, from 2000) is at least ``9.5e8`` in seconds,
  ``9.5e11`` in milliseconds and ``9.5e14`` in microseconds, and below ``1e11`` seconds (the year 5138), ``1e14``
  milliseconds and ``1e17`` microseconds for millennia: the three ranges are 2.5 orders of magnitude apart and
  ``auto`` never reads a plausible time in the wrong unit. Nanoseconds (``>= 1e17``) are read as microseconds and
  so are implausible.
* **Milliseconds.** Every time becomes epoch milliseconds the same way, in IEEE double arithmetic (Python, NumPy
  and Spark give the same bits): ``floor(v * MS_PER_UNIT[unit] + 0.5)``, the nearest millisecond, halves up.
  ISO-8601 text is first its epoch microseconds (fractions below the microsecond dropped), then read as a ``us``
  number. So ``1733574037.123`` seconds is ``1733574037123`` ms although the double product is a hair below it.
* **Plausible.** The milliseconds must lie in ``[TS_WINDOW.earliest_ms, now + TS_WINDOW.ahead_ms]``:
  ``[2000-01-01, now + 1 day]``; "now" is the reader's clock when it reads (the batch's, for Spark).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from types import MappingProxyType


class TsUnit(StrEnum):
    """What a ``ts`` value is: ``auto`` (numbers by magnitude, ISO-8601 text parsed), one epoch unit, or ``iso``."""

    AUTO = "auto"
    S = "s"
    MS = "ms"
    US = "us"
    ISO = "iso"


#: The name of the setting: a key of the event field mapping (JSON ``{"ts_unit": "s"}``) and of every reason about it.
TS_UNIT_SETTING = "ts_unit"
#: The field a valid event's fields and every enriched record carry the event time in: epoch milliseconds (an int)
#: as the rule reads ``ts`` (which passes through as sent); it replaces a producer's field of that name.
EVENT_TIME_FIELD = "ts_ms"
#: Milliseconds per unit of the epoch units (an ISO-8601 time is converted as its microseconds).
MS_PER_UNIT: Mapping[TsUnit, float] = MappingProxyType({TsUnit.S: 1000.0, TsUnit.MS: 1.0, TsUnit.US: 0.001})
#: ``auto``: a number below a bound is read in its unit (the first bound it is below), else in :data:`AUTO_TOP_UNIT`.
AUTO_UNIT_BELOW: tuple[tuple[float, TsUnit], ...] = ((1e11, TsUnit.S), (1e14, TsUnit.MS))
#: ``auto``: the unit of a number at or above the last bound of :data:`AUTO_UNIT_BELOW`.
AUTO_TOP_UNIT = TsUnit.US
#: An epoch number written as text (a JSON string, a CSV field; Spark reads every ``ts`` as text): optional minus
#: sign, digits, optional fraction and exponent.
EPOCH_NUMBER_TEXT = r"^-?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?$"
_DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class PlausibleWindow:
    """The event times a reader accepts: from ``earliest_ms`` (epoch ms) to ``ahead_ms`` after its clock's now."""

    earliest_ms: int
    ahead_ms: int

    def latest_ms(self, now_ms: int) -> int:
        """The last plausible millisecond for a reader whose clock reads ``now_ms``."""
        return now_ms + self.ahead_ms

    @property
    def text(self) -> str:
        """``[2000-01-01, now + 1 day]``: the window as every reason names it."""
        start = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=self.earliest_ms)
        days = self.ahead_ms / _DAY_MS
        return f"[{start:%Y-%m-%d}, now + {days:g} day{'' if days == 1 else 's'}]"


#: The plausible window: from 2000-01-01T00:00:00Z to one day after the reader's now.
TS_WINDOW = PlausibleWindow(earliest_ms=946_684_800_000, ahead_ms=_DAY_MS)


def auto_unit(number: float) -> TsUnit:
    """The unit ``auto`` reads ``number`` in (:data:`AUTO_UNIT_BELOW`)."""
    for bound, unit in AUTO_UNIT_BELOW:
        if number < bound:
            return unit
    return AUTO_TOP_UNIT
