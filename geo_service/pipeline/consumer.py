"""Read one worker's shard(s) of a geo stream: locate them by hash key, resume from a checkpoint, poll.

Worker ``i`` of a spec reads the shard whose hash-key range contains ``workers[i].hash_key``
(``docs/CONTRACTS.md``); a worker owning ``k > 1`` shards reads one shard per key of its
``shard_keys`` (:func:`worker_shards`, one :class:`ShardConsumer` each). The shards come from the stream's
manifest (:class:`~geokernel.contracts.StreamManifest`, written by the deploy controller once the stream is
ACTIVE), not from Kinesis: ``DescribeStreamSummary`` allows 20 calls/s per account, so a thousand workers
looking their shards up at once would be throttled. Geo streams are created with ``spec.shard_count`` shards
and never resharded (a new spec gets a new stream instead: a reshard would move keys between shards and break
the per-key order of their records), but if a shard was split or merged the consumer reads every shard whose range
holds the key, parents before children (``ParentShardId``), moving on when a closed shard is exhausted.
Positions come from the lease checkpoint map (``AFTER_SEQUENCE_NUMBER``), else ``TRIM_HORIZON``.

``GetRecords`` allows five calls per second per shard
(https://docs.aws.amazon.com/kinesis/latest/APIReference/API_GetRecords.html); a consumer makes at most one
call per ``min_interval_s`` (default :data:`MIN_INTERVAL_S`: two calls a second, 40 % of the quota) and
answers a poll that comes sooner with an empty batch (``spaced=True``) that changes nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as EndpointError

from geo_service.adapters.aws import load_stream_manifest
from geo_service.adapters.timebase import Flag
from geo_service.errors import GeoServiceError
from geokernel.contracts.stream import ShardRange, StreamManifest
from geokernel.partition_spec.model import Spec

DEFAULT_LIMIT = 1000
#: Least time between two GetRecords calls on one shard (5 calls/s per shard is the quota).
MIN_INTERVAL_S = 0.5
#: GetRecords errors tried again at the consumer's next poll, not at once (the API reference's throttling and
#: server errors of GetRecords; the reads client makes no SDK retries, see :class:`geo_service.adapters.aws.Clients`).
RETRY_NEXT_POLL = frozenset({"ProvisionedThroughputExceededException", "KMSThrottlingException",
                             "InternalFailure", "ServiceUnavailable", "ThrottlingException"})
#: The GetRecords errors that are a throttle (counted by the worker's ``GeoReadThrottled`` metric).
THROTTLED = frozenset({"ProvisionedThroughputExceededException", "KMSThrottlingException", "ThrottlingException"})
#: Connection failures of GetRecords in a row tried again at the next poll; one more is raised.
MAX_FAILED_READS = 5

#: One shard of a geo stream (the manifest's record).
ShardInfo = ShardRange
#: Told of every GetRecords call: ``<stream>/<shard>``, the ``MillisBehindLatest`` it returned (None when it failed),
#: and whether it was throttled (:meth:`geo_service.adapters.metrics.WorkerMetrics.read`).
ReadObserver = Callable[[str, int | None, bool], None]


class ShardNotFound(GeoServiceError, RuntimeError):
    """No shard of the stream contains the worker's hash key (names the stream and key)."""


class KinesisRecord(NamedTuple):
    """One record read from the stream (the fields a Lambda Kinesis event carries too): an immutable tuple, made
    for every record read (a frozen dataclass costs ~3x as much to make)."""

    shard_id: str
    sequence_number: str
    partition_key: str
    data: bytes
    arrival_s: float = 0.0  # ApproximateArrivalTimestamp, epoch seconds

    @classmethod
    def from_get_records(cls, shard_id: str, record: Mapping[str, Any]) -> KinesisRecord:
        """One entry of a GetRecords response's ``Records``: its arrival time a datetime (botocore's parse) or epoch
        seconds (:func:`geo_service.adapters.aws.read_records_raw`)."""
        arrival, data = record.get("ApproximateArrivalTimestamp"), record["Data"]
        return cls(shard_id, record["SequenceNumber"], record.get("PartitionKey", ""),
                   data if type(data) is bytes else bytes(data),
                   arrival if type(arrival) is float else 0.0 if arrival is None
                   else float(arrival) if isinstance(arrival, int) else arrival.timestamp())


@dataclass(frozen=True)
class Batch:
    """The result of one GetRecords call (or of a poll the call spacing answered without a call)."""

    shard_id: str
    records: tuple[KinesisRecord, ...]
    millis_behind_latest: int
    at_end: bool  # True when every shard for the key is closed and read to its end
    #: A batch from :class:`geo_service.swap.handover.GatedReader`: the checkpoint moves to ``checkpoint_sequence``
    #: (None: it stays), which stops before the first record the gate still holds.
    gated: bool = False
    checkpoint_sequence: str | None = None
    #: No call was made: the last one on this shard was less than ``min_interval_s`` ago.
    spaced: bool = False
    #: Thread CPU seconds of the GetRecords call that read it (the request, the answer's parse, the records made):
    #: part of the whole path's cost per event (:mod:`geo_service.serving.rows`).
    read_cpu_s: float = 0.0

    @property
    def last_sequence(self) -> str | None:
        return self.records[-1].sequence_number if self.records else None

    @property
    def checkpoint_at(self) -> str | None:
        """The sequence number the checkpoint moves to once this batch is processed (None: it stays)."""
        return self.checkpoint_sequence if self.gated else self.last_sequence


def shards_for_hash_key(manifest: StreamManifest, hash_key: str) -> list[ShardInfo]:
    """Return the shards of the manifest's stream whose hash-key range contains ``hash_key``, parents first.

    Raises
    ------
    ShardNotFound
        If no shard holds the key.
    """
    key = int(hash_key)
    found = [s for s in manifest.shards if s.holds(key)]
    if not found:
        raise ShardNotFound(f"no shard of geo stream {manifest.stream_name!r} contains hash key {hash_key!r}")
    return lineage_order(found)


def worker_shards(manifest: StreamManifest, hash_keys: Sequence[str]) -> list[list[ShardInfo]]:
    """Return one shard lineage per shard a worker owns: :func:`shards_for_hash_key` of each of its keys.

    Keys whose lineages share a shard (a stream made with fewer shards, or merged) are read as one lineage,
    so no shard is read twice.
    """
    groups: list[list[ShardInfo]] = []
    for key in hash_keys:
        found = shards_for_hash_key(manifest, key)
        ids = {s.shard_id for s in found}
        overlapping = [g for g in groups if ids & {s.shard_id for s in g}]
        merged = {s.shard_id: s for g in overlapping for s in g} | {s.shard_id: s for s in found}
        groups = [g for g in groups if g not in overlapping]
        groups.append(lineage_order(list(merged.values())))
    return groups


def shard_lineages(s3: Any, bucket: str, spec: Spec, worker_id: str, *, stop: Flag, retry_s: float,
                   dropped: Callable[[], bool] = lambda: False, on_wait: Callable[[str], object] = lambda why: None,
                   check: Callable[[], object] = lambda: None) -> list[list[ShardInfo]] | None:
    """The shard lineages of slot ``worker_id`` of ``spec``, from its stream's manifest once it is published.

    Polls the manifest (one S3 GET) every ``retry_s``, doubling up to eight times that while it is missing;
    returns None when ``stop`` is set or ``dropped()`` says the version will never go live. ``check()`` runs
    before each try (the worker checks its lease there) and ``on_wait(reason)`` after each miss.
    """
    wait = retry_s
    while not stop.is_set():
        check()
        manifest = load_stream_manifest(s3, bucket, spec.version)
        if manifest is not None:
            return worker_shards(manifest, spec.worker(worker_id).shard_keys)
        if dropped():
            return None
        on_wait(f"the manifest of v{spec.version}'s geo stream is not published yet")
        if stop.wait(wait):
            return None
        wait = min(wait * 2, retry_s * 8)
    return None


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


class CallSpacing:
    """The last GetRecords call per ``"<stream>/<shard>"`` of a process, shared by its consumers and threads: a
    call is allowed only ``interval`` after the previous one on the same shard (check and mark under one lock).

    Notes
    -----
    :meth:`take` marks the call when it is allowed; :meth:`done` moves the mark to when the call returned. The
    next call is therefore sent at least ``interval`` after this one was *sent*, whatever ran in between (a
    ``GetShardIterator`` call, a descheduled thread): marking only at :meth:`take` let a call sent late and the
    next two on time land in one wall-clock second (3 calls/s against a spacing of 2/s, seen on a loaded 2-core
    machine).
    """

    def __init__(self) -> None:
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def ready_in(self, key: str, now: float, interval: float) -> float:
        with self._lock:
            return max(0.0, self._last.get(key, -float("inf")) + interval - now)

    def take(self, key: str, now: float, interval: float) -> bool:
        """True (and the call is marked at ``now``) if ``interval`` passed since the last call on ``key``."""
        with self._lock:
            if now - self._last.get(key, -float("inf")) < interval:
                return False
            self._last[key] = now
            return True

    def done(self, key: str, now: float) -> None:
        """The call on ``key`` allowed by :meth:`take` returned at ``now``: the spacing counts from here."""
        with self._lock:
            self._last[key] = max(self._last.get(key, now), now)


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
    min_interval_s : float
        Least time between two GetRecords calls (:data:`MIN_INTERVAL_S`); 0 turns the spacing off.
    clock : callable
        Monotonic seconds (the worker's timebase).
    reads : botocore Kinesis client, optional
        The client of the ``GetRecords`` calls, without SDK retries (:class:`geo_service.adapters.aws.Clients`); default
        ``kinesis``.
    observe : callable, optional
        Told of every GetRecords call (:data:`ReadObserver`: the worker's metrics).

    Notes
    -----
    ``spacing`` (shared by the process's consumers) holds the last call per shard, so two consumers of one
    shard in one process keep the spacing together. A poll within ``min_interval_s`` of the last call returns an empty batch with ``spaced=True`` and
    ``millis_behind_latest=1``: nothing is known about records that arrived since, so it neither counts as
    caught up nor as drained.
    """

    def __init__(self, kinesis: Any, stream_name: str, shards: list[ShardInfo], checkpoint: Mapping[str, str],
                 limit: int = DEFAULT_LIMIT, *, min_interval_s: float = MIN_INTERVAL_S,
                 clock: Callable[[], float] | None = None, spacing: CallSpacing | None = None,
                 reads: Any = None, observe: ReadObserver | None = None) -> None:
        if not shards:
            raise ShardNotFound(f"ShardConsumer for {stream_name!r} needs at least one shard")
        self._kinesis = kinesis
        self._reads = kinesis if reads is None else reads
        self.stream_name = stream_name
        self.shards = tuple(shards)
        self.limit = limit
        self.min_interval_s = min_interval_s
        self._clock = clock or time.monotonic
        # last GetRecords call per "<stream>/<shard>", shared by every consumer of the process (a carried slot's
        # reader prepared ahead and the slot's own reader may read one shard in the same second)
        self._spacing = CallSpacing() if spacing is None else spacing
        self._positions: dict[str, str] = dict(checkpoint)
        self._current = 0
        self._iterator: str | None = None
        self._failed_in_row = 0
        self._observe = observe

    @property
    def shard_id(self) -> str:
        return self.shards[min(self._current, len(self.shards) - 1)].shard_id

    @property
    def at_end(self) -> bool:
        return self._current >= len(self.shards)

    def ready_in(self) -> float:
        """Seconds until the call spacing allows the next GetRecords call (0: now)."""
        return self._spacing.ready_in(f"{self.stream_name}/{self.shard_id}", self._clock(), self.min_interval_s)

    def poll(self) -> Batch:
        """Make one GetRecords call on the current shard and return what it read."""
        if self.at_end:
            return Batch(shard_id=self.shard_id, records=(), millis_behind_latest=0, at_end=True)
        shard_id = self.shard_id
        key = f"{self.stream_name}/{shard_id}"
        if not self._spacing.take(key, self._clock(), self.min_interval_s):
            return Batch(shard_id=shard_id, records=(), millis_behind_latest=1, at_end=False, spaced=True)
        cpu0 = time.thread_time()
        try:
            if self._iterator is None:
                self._iterator = self._new_iterator(shard_id)
            resp = self._reads.get_records(ShardIterator=self._iterator, Limit=self.limit)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code == "ExpiredIteratorException":
                self._iterator = None
                return Batch(shard_id=shard_id, records=(), millis_behind_latest=1, at_end=False)
            if code in RETRY_NEXT_POLL:
                # throttled or a passing server error (the reads client makes no SDK retries): nothing read, not
                # caught up (no drain, no handover); the iterator stays valid and the next call waits the spacing
                if self._observe is not None:
                    self._observe(key, None, code in THROTTLED)
                return Batch(shard_id=shard_id, records=(), millis_behind_latest=1, at_end=False)
            raise
        except (EndpointError, HTTPClientError):  # a dropped connection, a timeout: the same, at the next poll
            self._failed_in_row += 1
            if self._failed_in_row > MAX_FAILED_READS:
                raise
            return Batch(shard_id=shard_id, records=(), millis_behind_latest=1, at_end=False)
        finally:
            self._spacing.done(key, self._clock())
        self._failed_in_row = 0
        records = tuple(KinesisRecord.from_get_records(shard_id, r) for r in resp.get("Records", []))
        if records:
            self._positions[shard_id] = records[-1].sequence_number
        self._iterator = resp.get("NextShardIterator")
        if self._iterator is None:  # closed shard read to its end: move to the next one
            self._current += 1
        behind = int(resp.get("MillisBehindLatest", 0))
        if self._observe is not None:
            self._observe(key, behind, False)
        return Batch(shard_id=shard_id, records=records, millis_behind_latest=behind, at_end=self.at_end,
                     read_cpu_s=time.thread_time() - cpu0)

    def _new_iterator(self, shard_id: str) -> str:
        after = self._positions.get(shard_id)
        kw: dict[str, Any] = {"StreamName": self.stream_name, "ShardId": shard_id}
        if after:
            kw.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=after)
        else:
            kw["ShardIteratorType"] = "TRIM_HORIZON"
        return str(self._kinesis.get_shard_iterator(**kw)["ShardIterator"])
