"""The one home of every name two parts of the system must agree on (``docs/CONTRACTS.md``).

The partitioner Lambda, the deploy Lambdas, the router, the geo workers, the Spark job and the
local loop all build and parse these keys and limits; each is defined here once and imported
everywhere, so a change cannot reach one side only.

* **S3 keys**: :func:`spec_key` / :func:`parse_spec_key`, :func:`enriched_key` /
  :func:`parse_enriched_key`, :func:`geo_quarantine_key`, :func:`cost_key`.
* **Kinesis and DynamoDB names**: :func:`geo_stream_name`, :func:`lease_key` /
  :func:`parse_lease_key`, the control-table keys :class:`ControlKey`.
* **Event rules**: :data:`EVENT_LAT_LIMIT`, :data:`EVENT_LON_LIMIT`, :data:`MAX_EPOCH_MS`,
  :data:`MAX_PARTITION_KEY`, :data:`REQUIRED_FIELDS` and the quarantine reason codes
  :class:`ReasonCode` (applied by :mod:`partitioner.events` in Python and by
  ``glue_jobs/transform.py`` as Spark column expressions; ``tests/events/invalid_events.json``
  is the one table of bad events both are tested against).

Notes
-----
Stored strings never change: every enum here is a :class:`enum.StrEnum` whose values are the
strings already in buckets, streams and tables, so old objects stay readable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# ---------------------------------------------------------------- event rules

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
#: Fields every event must have (non-null; the ids also non-empty).
REQUIRED_FIELDS: tuple[str, ...] = ("event_id", "entity_id", "ts", "lat", "lon")


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


#: Every reason code, in a stable order.
REASON_CODES: tuple[str, ...] = tuple(c.value for c in ReasonCode)

# ---------------------------------------------------------------- control table


class ControlKey(StrEnum):
    """The ``pk`` of each item of the control table."""

    DESIRED = "desired"    # the newest published spec version (partitioner)
    ACTIVE = "active"      # the version the router routes to (deploy controller, at the flip)
    DEPLOY = "deploy"      # the deployment in progress (deploy controller)
    PLAN = "plan"          # the swap plan of that deployment (workers read it to carry slots over)
    POLICY = "policy"      # the partitioner policy's last decision
    SNAPSHOT = "snapshot"  # the last snapshot the partitioner processed (idempotence)
    LATENCY = "latency"    # snapshot-to-live samples recorded at each flip




class SwapMode(StrEnum):
    """How a new spec version reaches the workers (``SWAP_MODE`` of the deploy Lambdas and of the worker image).

    ``carry``: a slot that exists in both versions stays in the process that holds it, which loads only what it
    gains; only new slots start workers and only removed slots stop. ``whole``: every version starts a whole new
    fleet (ECS's own blue/green deployment in AWS) and the old one drains and stops.
    """

    CARRY = "carry"
    WHOLE = "whole"


class PlanStatus(StrEnum):
    """Where the plan stored at ``pk="plan"`` is: workers prepare ``started`` plans and drop ``rolled_back`` ones."""

    STARTED = "started"
    ROLLED_BACK = "rolled_back"
    DONE = "done"


class DeployStatus(StrEnum):
    """The ``status`` of the deployment item (control ``pk="deploy"``)."""

    IDLE = "idle"
    QUEUED = "queued"
    DEPLOYING = "deploying"
    WAITING_GREEN = "waiting_green"
    FLIPPED = "flipped"
    DRAINING = "draining"
    DONE = "done"
    ROLLED_BACK = "rolled_back"


# ---------------------------------------------------------------- S3 keys

_SPEC_KEY = re.compile(r"^specs/v(\d{8,})\.json$")
_ENRICHED_KEY = re.compile(r"^enriched/v(?P<version>\d+)/(?P<worker>[^/]+)/(?P<ms>\d+)\.jsonl$")
_LEASE_KEY = re.compile(r"^v(?P<version>\d+)#(?P<worker>.+)$")


def spec_key(version: int) -> str:
    """Return the S3 key of an immutable spec: ``specs/v<version:08d>.json``."""
    return f"specs/v{version:08d}.json"


def parse_spec_key(key: str) -> int | None:
    """Return the version a spec key names, or None for any other key."""
    m = _SPEC_KEY.match(key)
    return int(m.group(1)) if m else None


def enriched_key(version: int, worker_id: str, epoch_ms: int) -> str:
    """Return the key of one batch of worker output: ``enriched/v<version>/<worker>/<epoch_ms>.jsonl``."""
    return f"enriched/v{version}/{worker_id}/{epoch_ms}.jsonl"


def parse_enriched_key(key: str) -> tuple[int, str, int]:
    """Return ``(version, worker, epoch_ms)`` of an :func:`enriched_key`; ``ValueError`` naming ``key`` otherwise."""
    m = _ENRICHED_KEY.match(key)
    if m is None:
        raise ValueError(f"not an enriched output key (enriched/v<version>/<worker>/<epoch_ms>.jsonl): {key!r}")
    return int(m["version"]), m["worker"], int(m["ms"])


def geo_quarantine_key(version: int, worker_id: str, epoch_ms: int) -> str:
    """Return the key of records a worker could not process: ``quarantine/geo/v<version>/<worker>/<epoch_ms>.jsonl``."""
    return f"quarantine/geo/v{version}/{worker_id}/{epoch_ms}.jsonl"


def cost_key(version: int, worker_id: str, epoch_s: float) -> str:
    """Return the key of a cost report: ``costs/v<version>/<worker_id>/<epoch_s>.json``."""
    return f"costs/v{version}/{worker_id}/{int(epoch_s)}.json"


# ---------------------------------------------------------------- streams and leases


def geo_stream_prefix(prefix: str) -> str:
    """Return what every geo stream name of a deployment starts with: ``<prefix>-geo-v`` (IAM resource patterns)."""
    return f"{prefix}-geo-v"


def geo_stream_name(prefix: str, version: int) -> str:
    """Return the geo stream of a spec version: ``<prefix>-geo-v<version>``."""
    return f"{geo_stream_prefix(prefix)}{version}"


def lease_key(version: int, worker_id: str) -> str:
    """Return the lease item key of a slot: ``v<version>#<worker_id>``."""
    return f"v{version}#{worker_id}"


#: The key attribute of the leases table.
LEASE_KEY_ATTR = "lease_key"


@dataclass(frozen=True)
class LeaseRecord:
    """A lease item as the workers write it and the control plane reads it (``docs/CONTRACTS.md``)."""

    worker_id: str
    owner: str | None
    expires_at: float
    ready: bool
    released: bool
    drained: bool
    checkpoint: Mapping[str, str] = field(default_factory=dict)
    #: Epoch s: every record that arrived in the slot's shard before it was processed (``geo_service.handover``).
    caught_up_at: float = 0.0

    def held_by_other(self, owner: str, now: float) -> bool:
        """True while another owner holds it (owner set, not expired): a claim would fail."""
        return self.owner is not None and self.owner != owner and self.expires_at >= now

    def live_and_ready(self, now: float) -> bool:
        """True while its owner holds it unexpired and marked it ready."""
        return bool(self.owner) and self.expires_at > now and self.ready


def parse_lease_item(item: Mapping[str, Any]) -> LeaseRecord:
    """Decode a raw DynamoDB lease item (attribute-value form, as ``GetItem`` / ``BatchGetItem`` return it)."""
    key = item[LEASE_KEY_ATTR]["S"]
    parsed = parse_lease_key(key)
    checkpoint = item.get("checkpoint", {}).get("M", {})
    return LeaseRecord(
        worker_id=parsed[1] if parsed else key,
        owner=item["owner"]["S"] if "owner" in item else None,
        expires_at=float(item.get("expires_at", {}).get("N", "0")),
        ready=bool(item.get("ready", {}).get("BOOL", False)),
        released=bool(item.get("released", {}).get("BOOL", False)),
        drained=bool(item.get("drained", {}).get("BOOL", False)),
        checkpoint={k: v["S"] for k, v in checkpoint.items() if "S" in v},
        caught_up_at=float(item.get("caught_up_at", {}).get("N", "0")),
    )


def parse_lease_key(key: str) -> tuple[int, str] | None:
    """Return ``(version, worker_id)`` of a :func:`lease_key`, or None for any other string."""
    m = _LEASE_KEY.match(key)
    return (int(m["version"]), m["worker"]) if m else None
