"""Geo streams: one Kinesis stream per spec version, and its shard map in the specs bucket.

The partitioner names a version's stream in the spec (``stream_name``); the deploy controller creates it, lists its
shards once it is ACTIVE and writes :class:`StreamManifest` at :func:`stream_manifest_key`; the workers read that
object to find their shards, and the router puts records on the stream the active pointer names.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from geokernel.contracts.errors import ContractError


class StreamStatus(StrEnum):
    """A Kinesis data stream's ``StreamStatus`` as ``DescribeStreamSummary`` and ``ListStreams`` give it
    (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_StreamDescriptionSummary.html): only an ``ACTIVE``
    stream takes reads and writes."""

    CREATING = "CREATING"
    DELETING = "DELETING"
    ACTIVE = "ACTIVE"
    UPDATING = "UPDATING"

#: The router's event source mapping on the ingest stream: records per invocation at most, and seconds it waits to fill
#: a batch (the deployed defaults, ``router_batch_size`` and ``router_batching_window_s``; the local loop's poller).
ROUTER_BATCH_SIZE = 500
ROUTER_BATCHING_WINDOW_S = 1


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


def partition_hash_key(partition_key: str) -> int:
    """Return the hash key Kinesis gives a record's partition key: the MD5 of its UTF-8 bytes as a 128-bit integer.

    A record goes to the open shard whose hash-key range holds this value, so records with one partition key share
    a shard (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_PutRecordsRequestEntry.html).
    """
    return int.from_bytes(hashlib.md5(partition_key.encode("utf-8"), usedforsecurity=False).digest(), "big")


def shard_for_key(shards: Sequence[ShardRange], partition_key: str) -> ShardRange:
    """Return the open shard of ``shards`` that a record with ``partition_key`` goes to.

    Raises :class:`ContractError` if no open shard holds its hash key (``shards`` is not a whole stream).
    """
    hash_key = partition_hash_key(partition_key)
    for shard in shards:
        if not shard.closed and shard.holds(hash_key):
            return shard
    raise ContractError(f"no open shard of {[s.shard_id for s in shards]!r} holds partition key {partition_key!r}")


@dataclass(frozen=True, slots=True)
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

    def to_dict(self) -> dict[str, Any]:
        """The stored form: hash keys and sequence numbers as decimal strings (they exceed JSON's safe integers)."""
        return {"shard_id": self.shard_id, "starting_hash_key": str(self.starting_hash_key),
                "ending_hash_key": str(self.ending_hash_key), "starting_sequence": str(self.starting_sequence),
                "closed": self.closed, "parents": list(self.parents)}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ShardRange:
        return cls(shard_id=str(doc["shard_id"]), starting_hash_key=int(doc["starting_hash_key"]),
                   ending_hash_key=int(doc["ending_hash_key"]), starting_sequence=int(doc["starting_sequence"]),
                   closed=bool(doc["closed"]), parents=tuple(str(p) for p in doc["parents"]))


@dataclass(frozen=True, slots=True)
class StreamManifest:
    """A geo stream's shards as the deploy controller listed them (:func:`stream_manifest_key`)."""

    version: int
    stream_name: str
    shards: tuple[ShardRange, ...]

    def to_json(self) -> str:
        return json.dumps({"version": self.version, "stream_name": self.stream_name,
                           "shards": [s.to_dict() for s in self.shards]}, sort_keys=True)

    @classmethod
    def from_json(cls, data: bytes | str, where: str) -> StreamManifest:
        """Parse a manifest; :class:`ContractError` (a ``ValueError``) naming ``where`` and the bad value."""
        try:
            doc = json.loads(data)
            shards = tuple(ShardRange.from_dict(s) for s in doc["shards"])
            return cls(version=int(doc["version"]), stream_name=str(doc["stream_name"]), shards=shards)
        except (ValueError, KeyError, TypeError) as exc:
            raise ContractError(f"{where}: not a stream manifest ({type(exc).__name__}: {exc})") from None
