"""Read one worker's shard(s) of a geo stream: locate them by hash key, resume from a checkpoint, poll.

Worker ``i`` of a spec reads the shard whose hash-key range contains ``workers[i].hash_key``
(``docs/CONTRACTS.md``); a worker owning ``k > 1`` shards reads one shard per key of its
``shard_keys`` (:func:`worker_shards`, one :class:`ShardConsumer` each). Geo streams are created
with ``spec.shard_count`` shards and never
resharded (seed 002), but if a shard was split or merged the consumer reads every
shard whose range holds the key, parents before children (``ParentShardId``), moving on
when a closed shard is exhausted. Positions come from the lease checkpoint map
(``AFTER_SEQUENCE_NUMBER``), else ``TRIM_HORIZON``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from geo_service.errors import GeoServiceError

DEFAULT_LIMIT = 1000


class StreamNotReady(GeoServiceError, RuntimeError):
    """The geo stream does not exist yet or is not ACTIVE (the deployer creates it); retry later."""


class ShardNotFound(GeoServiceError, RuntimeError):
    """No shard of the stream contains the worker's hash key (names the stream and key)."""


@dataclass(frozen=True)
class ShardInfo:
    """One shard whose hash-key range contains the worker's key."""

    shard_id: str
    starting_hash_key: int
    ending_hash_key: int
    starting_sequence: int
    closed: bool
    parents: tuple[str, ...] = ()


@dataclass(frozen=True)
class KinesisRecord:
    """One record read from the stream (the fields a Lambda Kinesis event carries too)."""

    shard_id: str
    sequence_number: str
    partition_key: str
    data: bytes
    arrival_s: float = 0.0  # ApproximateArrivalTimestamp, epoch seconds

    @classmethod
    def from_get_records(cls, shard_id: str, record: Mapping[str, Any]) -> KinesisRecord:
        """One entry of a GetRecords response's ``Records``."""
        arrival = record.get("ApproximateArrivalTimestamp")
        return cls(shard_id=shard_id, sequence_number=record["SequenceNumber"],
                   partition_key=record.get("PartitionKey", ""), data=bytes(record["Data"]),
                   arrival_s=arrival.timestamp() if arrival is not None else 0.0)


@dataclass(frozen=True)
class Batch:
    """The result of one GetRecords call."""

    shard_id: str
    records: tuple[KinesisRecord, ...]
    millis_behind_latest: int
    at_end: bool  # True when every shard for the key is closed and read to its end
    #: A batch from :class:`geo_service.handover.GatedReader`: the checkpoint moves to ``checkpoint_sequence``
    #: (None: it stays), which stops before the first record the gate still holds.
    gated: bool = False
    checkpoint_sequence: str | None = None

    @property
    def last_sequence(self) -> str | None:
        return self.records[-1].sequence_number if self.records else None

    @property
    def checkpoint_at(self) -> str | None:
        """The sequence number the checkpoint moves to once this batch is processed (None: it stays)."""
        return self.checkpoint_sequence if self.gated else self.last_sequence


def shards_for_hash_key(kinesis: Any, stream_name: str, hash_key: str) -> list[ShardInfo]:
    """Return the shards of ``stream_name`` whose hash-key range contains ``hash_key``, parents first.

    Raises
    ------
    StreamNotReady
        If the stream does not exist or is not ACTIVE yet.
    ShardNotFound
        If the stream is active but no shard holds the key.
    """
    key = int(hash_key)
    try:
        status = kinesis.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]["StreamStatus"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            raise StreamNotReady(f"geo stream {stream_name!r} does not exist yet") from exc
        raise
    if status not in ("ACTIVE", "UPDATING"):
        raise StreamNotReady(f"geo stream {stream_name!r} is {status!r}, not ACTIVE")
    shards: list[ShardInfo] = []
    kwargs: dict[str, Any] = {"StreamName": stream_name}
    while True:
        resp = kinesis.list_shards(**kwargs)
        for s in resp.get("Shards", []):
            lo, hi = int(s["HashKeyRange"]["StartingHashKey"]), int(s["HashKeyRange"]["EndingHashKey"])
            if lo <= key <= hi:
                seq = s["SequenceNumberRange"]
                parents = tuple(s[k] for k in ("ParentShardId", "AdjacentParentShardId") if s.get(k))
                shards.append(ShardInfo(shard_id=s["ShardId"], starting_hash_key=lo, ending_hash_key=hi,
                                        starting_sequence=int(seq["StartingSequenceNumber"]),
                                        closed="EndingSequenceNumber" in seq, parents=parents))
        token = resp.get("NextToken")
        if not token:
            break
        kwargs = {"NextToken": token}
    if not shards:
        raise ShardNotFound(f"no shard of geo stream {stream_name!r} contains hash key {hash_key!r}")
    return lineage_order(shards)


def worker_shards(kinesis: Any, stream_name: str, hash_keys: Sequence[str]) -> list[list[ShardInfo]]:
    """Return one shard lineage per shard a worker owns: :func:`shards_for_hash_key` of each of its keys.

    Keys whose lineages share a shard (a stream made with fewer shards, or merged) are read as one lineage,
    so no shard is read twice.
    """
    groups: list[list[ShardInfo]] = []
    for key in hash_keys:
        found = shards_for_hash_key(kinesis, stream_name, key)
        ids = {s.shard_id for s in found}
        overlapping = [g for g in groups if ids & {s.shard_id for s in g}]
        merged = {s.shard_id: s for g in overlapping for s in g} | {s.shard_id: s for s in found}
        groups = [g for g in groups if g not in overlapping]
        groups.append(lineage_order(list(merged.values())))
    return groups


def lineage_order(shards: list[ShardInfo]) -> list[ShardInfo]:
    """Order shards so every parent comes before its children (ties by starting sequence number)."""
    remaining = sorted(shards, key=lambda s: (s.starting_sequence, s.shard_id))
    ordered: list[ShardInfo] = []
    while remaining:
        ids = {s.shard_id for s in remaining}
        ready = [s for s in remaining if not any(p in ids for p in s.parents)] or remaining[:1]
        ordered.append(ready[0])
        remaining.remove(ready[0])
    return ordered


class ShardConsumer:
    """Polls the shard(s) holding one hash key, resuming after the checkpointed sequence numbers.

    Parameters
    ----------
    kinesis : botocore Kinesis client
    stream_name : str
    shards : list of ShardInfo
        From :func:`shards_for_hash_key`.
    checkpoint : mapping
        Shard id -> last processed sequence number (the lease's ``checkpoint``).
    limit : int
        Max records per GetRecords call.
    """

    def __init__(self, kinesis: Any, stream_name: str, shards: list[ShardInfo], checkpoint: Mapping[str, str],
                 limit: int = DEFAULT_LIMIT) -> None:
        if not shards:
            raise ShardNotFound(f"ShardConsumer for {stream_name!r} needs at least one shard")
        self._kinesis = kinesis
        self.stream_name = stream_name
        self.shards = tuple(shards)
        self.limit = limit
        self._positions: dict[str, str] = dict(checkpoint)
        self._current = 0
        self._iterator: str | None = None

    @property
    def shard_id(self) -> str:
        return self.shards[min(self._current, len(self.shards) - 1)].shard_id

    @property
    def at_end(self) -> bool:
        return self._current >= len(self.shards)

    def poll(self) -> Batch:
        """Make one GetRecords call on the current shard and return what it read."""
        if self.at_end:
            return Batch(shard_id=self.shard_id, records=(), millis_behind_latest=0, at_end=True)
        shard_id = self.shard_id
        if self._iterator is None:
            self._iterator = self._new_iterator(shard_id)
        try:
            resp = self._kinesis.get_records(ShardIterator=self._iterator, Limit=self.limit)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code == "ExpiredIteratorException":
                self._iterator = None
                return Batch(shard_id=shard_id, records=(), millis_behind_latest=1, at_end=False)
            if code == "ProvisionedThroughputExceededException":
                # throttled past the SDK's retries: nothing read, not caught up (no drain, no handover); the iterator
                # stays valid and the worker's poll loop waits its interval before the next call
                return Batch(shard_id=shard_id, records=(), millis_behind_latest=1, at_end=False)
            raise
        records = tuple(KinesisRecord.from_get_records(shard_id, r) for r in resp.get("Records", []))
        if records:
            self._positions[shard_id] = records[-1].sequence_number
        self._iterator = resp.get("NextShardIterator")
        if self._iterator is None:  # closed shard read to its end: move to the next one
            self._current += 1
        return Batch(shard_id=shard_id, records=records, millis_behind_latest=int(resp.get("MillisBehindLatest", 0)),
                     at_end=self.at_end)

    def _new_iterator(self, shard_id: str) -> str:
        after = self._positions.get(shard_id)
        kw: dict[str, Any] = {"StreamName": self.stream_name, "ShardId": shard_id}
        if after:
            kw.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=after)
        else:
            kw["ShardIteratorType"] = "TRIM_HORIZON"
        return str(self._kinesis.get_shard_iterator(**kw)["ShardIterator"])
