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
  :class:`ReasonCode` (applied by :mod:`partitioner.load.events` in Python and by
  ``aggregation/events.py`` as Spark column expressions; ``tests/events/invalid_events.json``
  is the one table of bad events both are tested against).

Notes
-----
Stored strings never change: every enum here is a :class:`enum.StrEnum` whose values are the
strings already in buckets, streams and tables, so old objects stay readable.
"""

from __future__ import annotations

import json
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
    SWAP = "swap"          # the few fields of "plan" a worker reads (SwapHead): a small item every worker polls


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


@dataclass(frozen=True)
class SwapHead:
    """Control ``pk="swap"``: what a worker needs of the deploy plan, small enough for every worker to poll.

    The full plan (``pk="plan"``: kept, started and stopped slot lists, per-slot gains) grows with the number of
    workers; a thousand workers polling it would read O(workers) bytes each, O(workers^2) in all, from one item
    (one DynamoDB partition: 3,000 read units/s,
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html). A worker derives
    what the plan does to its own slot from the two specs instead (:meth:`keeps`): in ``carry`` mode a slot of both
    specs is kept, in ``whole`` mode none is (``lambdas/deploy/plan.py`` ``plan_swap``).
    """

    from_version: int | None
    to_version: int
    mode: str
    status: str
    updated_at: float = 0.0

    @property
    def started(self) -> bool:
        return self.status == PlanStatus.STARTED

    @property
    def rolled_back(self) -> bool:
        return self.status == PlanStatus.ROLLED_BACK

    def keeps(self, version: int, worker_id: str, new_ids: frozenset[str] | set[str]) -> bool:
        """True when this started carry swap moves slot ``worker_id`` of ``version`` over to ``to_version``.

        ``new_ids`` are the worker ids of ``to_version``'s spec."""
        return (self.started and self.mode == SwapMode.CARRY and self.from_version == version
                and self.to_version > version and worker_id in new_ids)

    def to_item(self) -> dict[str, Any]:
        """The item's attributes as plain values (``pk`` excluded)."""
        return {"from_version": self.from_version, "to_version": self.to_version, "mode": self.mode,
                "status": self.status, "updated_at": self.updated_at}

    @classmethod
    def from_raw(cls, item: Mapping[str, Mapping[str, Any]]) -> SwapHead:
        """Decode a raw DynamoDB ``pk="swap"`` item; ``ValueError`` naming the bad attribute."""
        def number(key: str) -> int | None:
            attr = item.get(key)
            if attr is None or "NULL" in attr:
                return None
            try:
                return int(attr.get("N", attr.get("S")))
            except (TypeError, ValueError):
                raise ValueError(f"control item 'swap' has a bad {key!r}: {dict(attr)!r}") from None

        to_version = number("to_version")
        if to_version is None:
            raise ValueError(f"control item 'swap' has no 'to_version': {dict(item)!r}")
        updated = item.get("updated_at", {}).get("N", "0")
        return cls(from_version=number("from_version"), to_version=to_version,
                   mode=str(item.get("mode", {}).get("S", "")), status=str(item.get("status", {}).get("S", "")),
                   updated_at=float(updated))


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


def stream_manifest_key(version: int) -> str:
    """Return the S3 key (specs bucket) of a geo stream's shard map: ``streams/v<version:08d>.json``.

    The deploy controller writes it once the stream is ACTIVE, before any worker is told about the version, so
    workers find their shards with one S3 GET instead of Kinesis ``DescribeStreamSummary`` (20 calls/s per
    account) and ``ListShards`` calls: a thousand workers opening their slots at once stay far below both
    (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_DescribeStreamSummary.html).
    """
    return f"streams/v{version:08d}.json"


@dataclass(frozen=True)
class ShardRange:
    """One shard of a geo stream: its hash-key range, first sequence number and parents (``ListShards``)."""

    shard_id: str
    starting_hash_key: int
    ending_hash_key: int
    starting_sequence: int
    closed: bool = False
    parents: tuple[str, ...] = ()

    def holds(self, hash_key: int) -> bool:
        return self.starting_hash_key <= hash_key <= self.ending_hash_key

    @classmethod
    def from_list_shards(cls, entry: Mapping[str, Any]) -> ShardRange:
        """One entry of a Kinesis ``ListShards`` response's ``Shards``."""
        seq = entry["SequenceNumberRange"]
        return cls(shard_id=str(entry["ShardId"]), starting_hash_key=int(entry["HashKeyRange"]["StartingHashKey"]),
                   ending_hash_key=int(entry["HashKeyRange"]["EndingHashKey"]),
                   starting_sequence=int(seq["StartingSequenceNumber"]), closed="EndingSequenceNumber" in seq,
                   parents=tuple(str(entry[k]) for k in ("ParentShardId", "AdjacentParentShardId") if entry.get(k)))


@dataclass(frozen=True)
class StreamManifest:
    """A geo stream's shards as the deploy controller listed them (:func:`stream_manifest_key`)."""

    version: int
    stream_name: str
    shards: tuple[ShardRange, ...]

    def to_json(self) -> str:
        return json.dumps({"version": self.version, "stream_name": self.stream_name,
                           "shards": [{"shard_id": s.shard_id, "starting_hash_key": str(s.starting_hash_key),
                                       "ending_hash_key": str(s.ending_hash_key),
                                       "starting_sequence": str(s.starting_sequence), "closed": s.closed,
                                       "parents": list(s.parents)} for s in self.shards]}, sort_keys=True)

    @classmethod
    def from_json(cls, data: bytes | str, where: str) -> StreamManifest:
        """Parse a manifest; ``ValueError`` naming ``where`` and the bad value."""
        try:
            doc = json.loads(data)
            shards = tuple(ShardRange(shard_id=str(s["shard_id"]), starting_hash_key=int(s["starting_hash_key"]),
                                      ending_hash_key=int(s["ending_hash_key"]),
                                      starting_sequence=int(s["starting_sequence"]), closed=bool(s["closed"]),
                                      parents=tuple(str(p) for p in s["parents"])) for s in doc["shards"])
            return cls(version=int(doc["version"]), stream_name=str(doc["stream_name"]), shards=shards)
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{where}: not a stream manifest ({type(exc).__name__}: {exc})") from None


def handover_key(version: int) -> str:
    """Return the leases-table key of the handover summary of a swap into ``version``: ``handover#v<version>``.

    It never parses as a :func:`lease_key` (those start with ``v``), so lease readers and scans skip it.
    """
    return f"handover#v{version}"


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
