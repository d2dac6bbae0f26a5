"""Reading the ingest stream back: a time range of every shard (``replay --from/--to``), or one shard's sequence
range (``redrive``, from a failure message).

* ``GetShardIterator`` ``AT_TIMESTAMP`` (a time range) or ``AT_SEQUENCE_NUMBER`` (a sequence range), then
  ``GetRecords`` until past the end: a record that arrived at or after ``--to``, or whose sequence number is past the
  range's end; or the shard's tip (an empty answer 0 ms behind the latest record), or its end (a closed shard).
* At most one ``GetRecords`` call per shard every :data:`MIN_GAP_S` (the quota is 5 calls/s per shard,
  https://docs.aws.amazon.com/kinesis/latest/APIReference/API_GetRecords.html); an iterator that expired while the
  records were being put (it lives 5 minutes) is asked again after the last record read.
* Shards are read one at a time, parents before children (a resharded stream): an entity's records are on one shard
  at a time, so they come out in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from geokernel.contracts.stream import ShardRange
from georebal.deployment import client_error
from georebal.errors import DeploymentError
from georebal.puts import OutRecord
from georebal.smoke.clock import Clock

MIN_GAP_S = 0.2
LIMIT = 10_000  # records per GetRecords call at most
GONE = ("ResourceNotFoundException", "InvalidArgumentException")  # a shard or sequence number past the retention


@dataclass(frozen=True)
class StreamRecord:
    """One record read from the stream."""

    shard_id: str
    sequence: str
    partition_key: str
    data: bytes
    arrival_s: float

    def out(self, stream: str) -> OutRecord:
        """The same data and partition key, to put again."""
        return OutRecord(self.data, self.partition_key, f"{stream}/{self.shard_id}/{self.sequence}")


def list_shards(kinesis: Any, stream: str) -> list[ShardRange]:
    """Every shard of ``stream`` that ``ListShards`` lists (those within the retention), parents first."""
    shards: list[ShardRange] = []
    ask: dict[str, Any] = {"StreamName": stream}
    try:
        while True:
            page = kinesis.list_shards(**ask)
            shards += [ShardRange.from_list_shards(s) for s in page.get("Shards", [])]
            if not page.get("NextToken"):
                break
            ask = {"NextToken": page["NextToken"]}
    except ClientError as exc:
        raise DeploymentError(f"stream {stream!r}: cannot list its shards ({client_error(exc)})") from None
    by_id = {s.shard_id: s for s in shards}
    depth: dict[str, int] = {}

    def level(shard: ShardRange) -> int:
        if shard.shard_id not in depth:
            depth[shard.shard_id] = 0  # guards a cycle (none in Kinesis)
            parents = [p for p in shard.parents if p in by_id]
            depth[shard.shard_id] = 1 + max((level(by_id[p]) for p in parents), default=-1)
        return depth[shard.shard_id]

    return sorted(shards, key=lambda s: (level(s), s.starting_hash_key))


def retention_hours(kinesis: Any, stream: str) -> int:
    """``RetentionPeriodHours`` of ``stream`` (``DescribeStreamSummary``)."""
    try:
        return int(kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]
                   ["RetentionPeriodHours"])
    except ClientError as exc:
        raise DeploymentError(f"stream {stream!r}: cannot describe it ({client_error(exc)})") from None


class ShardReader:
    """Reads one shard from a starting position until ``stop(record)`` says a record is past the end."""

    def __init__(self, kinesis: Any, stream: str, shard_id: str, clock: Clock, limit: int = LIMIT) -> None:
        self.kinesis, self.stream, self.shard_id, self.clock, self.limit = kinesis, stream, shard_id, clock, limit
        self._last_call = -float("inf")

    def iterator(self, kind: str, **position: Any) -> str:
        """A shard iterator (raises ``ClientError``: the caller tells a gone range from a failure)."""
        return str(self.kinesis.get_shard_iterator(StreamName=self.stream, ShardId=self.shard_id,
                                                   ShardIteratorType=kind, **position)["ShardIterator"])

    def records(self, kind: str, stop: Callable[[StreamRecord], bool], **position: Any) -> Iterator[StreamRecord]:
        """The records from the position ``kind`` / ``position`` on, until ``stop``, the tip or the shard's end."""
        it: str | None = self.iterator(kind, **position)
        last: str | None = None
        while it:
            wait = self._last_call + MIN_GAP_S - self.clock.now()
            if wait > 0:
                self.clock.sleep(wait)
            self._last_call = self.clock.now()
            try:
                answer = self.kinesis.get_records(ShardIterator=it, Limit=self.limit)
            except ClientError as exc:
                if client_error(exc).startswith("ExpiredIteratorException"):
                    it = (self.iterator("AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=last) if last
                          else self.iterator(kind, **position))
                    continue
                raise DeploymentError(f"stream {self.stream!r} shard {self.shard_id}: GetRecords failed "
                                      f"({client_error(exc)})") from None
            for raw in answer.get("Records", []):
                record = _record(self.shard_id, raw)
                if stop(record):
                    return
                yield record
                last = record.sequence
            it = answer.get("NextShardIterator")
            if not answer.get("Records") and not answer.get("MillisBehindLatest"):
                return


def _record(shard_id: str, raw: dict[str, Any]) -> StreamRecord:
    arrival = raw.get("ApproximateArrivalTimestamp")
    return StreamRecord(shard_id, str(raw["SequenceNumber"]), str(raw.get("PartitionKey", "")), bytes(raw["Data"]),
                        arrival.timestamp() if arrival is not None else 0.0)


class TimeRange:
    """The records of every shard of ``stream`` that arrived in ``[start_s, end_s)`` (:meth:`records`), and the
    share of the range read so far (:meth:`fraction`, for progress)."""

    def __init__(self, kinesis: Any, stream: str, start_s: float, end_s: float, clock: Clock) -> None:
        self.kinesis, self.stream, self.start_s, self.end_s, self.clock = kinesis, stream, start_s, end_s, clock
        self.shards = list_shards(kinesis, stream)
        self._done = 0
        self._at = start_s

    def fraction(self) -> float | None:
        if not self.shards:
            return None
        within = min(max((self._at - self.start_s) / max(self.end_s - self.start_s, 1e-9), 0.0), 1.0)
        return (self._done + within) / len(self.shards)

    def records(self, limit: int = LIMIT) -> Iterator[StreamRecord]:
        since = datetime.fromtimestamp(self.start_s, UTC)
        for shard in self.shards:
            self._at = self.start_s
            reader = ShardReader(self.kinesis, self.stream, shard.shard_id, self.clock, limit)
            try:
                for record in reader.records("AT_TIMESTAMP", lambda r: r.arrival_s >= self.end_s, Timestamp=since):
                    self._at = record.arrival_s
                    yield record
            except ClientError as exc:
                if client_error(exc).split(":")[0] not in GONE:
                    raise DeploymentError(f"stream {self.stream!r} shard {shard.shard_id}: cannot read it "
                                          f"({client_error(exc)})") from None
            self._done += 1


@dataclass(frozen=True)
class RangeRead:
    """One shard's records from ``start`` to ``end`` as the stream still holds them: ``complete`` when the first
    is ``start`` and the last ``end`` (none gone); ``gone`` says why not, when the stream refused the range."""

    records: tuple[StreamRecord, ...]
    complete: bool
    gone: str = ""


def read_range(kinesis: Any, stream: str, shard_id: str, start: str, end: str, clock: Clock) -> RangeRead:
    """The records ``start`` .. ``end`` (sequence numbers, both in) of ``shard_id``."""
    last = int(end)
    reader = ShardReader(kinesis, stream, shard_id, clock)
    try:
        found = tuple(reader.records("AT_SEQUENCE_NUMBER", lambda r: int(r.sequence) > last,
                                     StartingSequenceNumber=start))
    except ClientError as exc:
        if client_error(exc).split(":")[0] in GONE:
            return RangeRead((), False, client_error(exc))
        raise DeploymentError(f"stream {stream!r} shard {shard_id}: cannot read it ({client_error(exc)})") from None
    complete = bool(found) and found[0].sequence == start and found[-1].sequence == end
    return RangeRead(found, complete)
