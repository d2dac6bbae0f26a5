"""Event rules: the limits of a valid location event, its required fields and the quarantine reason codes.

Applied by :mod:`geokernel.events` in Python (the router and the geo worker) and by ``glue_jobs/events.py`` as
Spark column expressions; ``tests/events/event_rules.json`` is the one table of valid and invalid events both are
tested against (``docs/CONTRACTS.md``, "Events").
"""

from __future__ import annotations

from enum import StrEnum

from geokernel.contracts.event_fields import EventField

#: Latitude limit of a valid event (web mercator's edge; events between MAX_LAT and it clamp).
EVENT_LAT_LIMIT = 85.05112878
#: Longitude limit of a valid event (both -180 and 180 are valid).
EVENT_LON_LIMIT = 180.0
#: Largest accepted epoch-millisecond timestamp (9999-12-31T23:59:59.999Z).
MAX_EPOCH_MS = 253402300799999
#: Kinesis partition keys are 1-256 Unicode characters; the router uses ``entity_id``.
#: https://docs.aws.amazon.com/kinesis/latest/APIReference/API_PutRecord.html
MAX_PARTITION_KEY = 256
#: An ISO-8601 ``ts`` must start with a date and a time to the minute (a date alone is not an instant).
ISO_DATETIME_PREFIX = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}"
#: Fields every event must have (non-null; the ids also non-empty), by canonical name (a producer's own names:
#: :class:`geokernel.contracts.event_fields.EventFields`).
REQUIRED_FIELDS: tuple[str, ...] = tuple(f.value for f in EventField)


class ReasonCode(StrEnum):
    """Why an event was quarantined: the prefix of every quarantine record's ``reason``."""

    UNPARSABLE_JSON = "unparsable_json"
    NOT_AN_OBJECT = "not_an_object"
    MISSING_FIELD = "missing_field"
    BAD_TYPE = "bad_type"
    NAN = "nan"
    LAT_OUT_OF_RANGE = "lat_out_of_range"
    LON_OUT_OF_RANGE = "lon_out_of_range"
    BAD_TIMESTAMP = "bad_timestamp"
    #: A Kinesis record with the KPL magic that does not decode (:mod:`geokernel.contracts.kpl`): the whole
    #: record is quarantined, before any event is read from it.
    CORRUPT_KPL_RECORD = "corrupt_kpl_record"


#: Every reason code, in a stable order.
REASON_CODES: tuple[str, ...] = tuple(c.value for c in ReasonCode)
