"""Per-batch routing logic: validate events, locate partitions in the active spec, put to the geo stream.

**The active pointer is read on every invocation** (control ``pk="active"``, a strongly consistent ``GetItem``;
the spec behind it is parsed once per version), so each ingest shard flips once and for good. Lambda runs one
shard's batches one at a time, in order (with a parallelization factor, one partition key's: an entity's), not
always in the same execution environment (https://docs.aws.amazon.com/lambda/latest/dg/with-kinesis.html); a
strongly consistent read returns every write acknowledged before it
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.ReadConsistency.html). So once an
invocation routed an entity by version ``m``, every later one routes it by ``m`` or newer, and every record of the
entity on an older stream arrived before its first record of ``m``: the handover gate's caught-up rule
(:mod:`geo_service.swap.handover`) then orders them, also for a cell that stays with its worker. With a cache
(``ROUTER_SPEC_TTL_S`` > 0) an environment that read ``active`` just before the flip routes by the old version for
up to that long while another already routes by the new one, which can put an entity's later record on the old
stream after its earlier one on the new (a local CI run processed one entity's v1 record after its v3 record; that
this was the cause was not shown). Two read units per invocation that puts (the read, and the flip fence's read
after the puts, :func:`fence_flip`): at 100,000 events/s, ~200 invocations/s of 500 records read one item 400 times a
second, 13 % of a partition's 3,000.
A record is put
to the active version's geo stream with ``PartitionKey = entity_id`` and ``ExplicitHashKey`` = the
hash key of the worker owning the event's partition (a split hot cell resolves by entity bucket).
Lookups are vectorised: one :meth:`geokernel.partition_spec.index.SpecIndex.locate` call per batch.

Geo stream record (``docs/CONTRACTS.md``): the original event bytes, unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from geokernel.contracts.slot import SlotId
from geokernel.events import Rejection, ValidEvent, parse_event, quarantine_record
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Spec
from geokernel.partition_spec.shards import entity_shards
from lambdas.router.ledger import RouterLedger, Target
from lambdas.router.stateful import Routed, ingest_order, route_stamped
from lambdas.router.waves import entity_waves
from lambdas.runtime.dynamodb import ControlTable
from lambdas.runtime.errors import AdapterError
from lambdas.runtime.kinesis import GeoStreams, PutEntry
from lambdas.runtime.records import read_active
from lambdas.runtime.s3 import QuarantineSink, SpecStore
from lambdas.runtime.timestamps import now_iso

Clock = Callable[[], float]
#: Called with the points of a batch's valid events once a table routes them (lon, lat): the surge meter's feed.
PointsSeen = Callable[[npt.NDArray[np.float64], npt.NDArray[np.float64]], None]


@dataclass(frozen=True)
class InputRecord:
    """One ingest record: its id for batchItemFailures, payload, and where it came from.

    ``rejected`` is a quarantine reason found before the event was read (a KPL aggregated record that does not
    decode, see :func:`lambdas.router.handler.parse_kinesis_event`): the record is quarantined with it as it is.
    """

    item_id: str
    data: bytes
    source: str
    rejected: str | None = None


@dataclass(frozen=True)
class RouteResult:
    """What happened to a batch: ids to retry, and counts per outcome."""

    failed_ids: tuple[str, ...]
    routed: int
    quarantined: int
    version: int | None
    reasons: tuple[str, ...] = ()
    #: the valid records routed by ``version`` (put by this invocation, or by an earlier try of the batch)
    put_ids: tuple[str, ...] = ()


class RoutingTable:
    """A spec ready for routing: its index and the ExplicitHashKey of each partition's worker."""

    def __init__(self, spec: Spec, stream_name: str) -> None:
        self.spec = spec
        self.version = spec.version
        self.stream_name = stream_name
        self.index = SpecIndex(spec)
        worker_keys = {w.id: w.shard_keys for w in spec.workers}
        own = [worker_keys[p.worker] for p in spec.partitions]
        self.labels: npt.NDArray[np.object_] = np.array([str(SlotId(spec.version, p.worker)) for p in spec.partitions],
                                                        dtype=object)
        self.hash_keys: npt.NDArray[np.object_] = np.array([k[0] for k in own], dtype=object)
        # per partition: its worker's shard count and keys (one row, padded); entity_shards picks the column
        self.shards: npt.NDArray[np.int64] = np.array([len(k) for k in own], dtype=np.int64)
        width = int(self.shards.max(initial=1))
        self.shard_keys: npt.NDArray[np.object_] | None = None
        if width > 1:
            self.shard_keys = np.array([list(k) + [k[0]] * (width - len(k)) for k in own], dtype=object)

    def hash_keys_for(self, lon: npt.ArrayLike, lat: npt.ArrayLike, entity_ids: Sequence[str]) -> list[str]:
        """Return the ExplicitHashKey of each point's partition (vectorised).

        A worker owning ``k > 1`` shards gets each entity on shard ``entity_shard(entity_id, k)`` of its keys (one MD5
        per entity, :func:`~geokernel.partition_spec.shards.entity_shards`; the rest is NumPy), so
        one entity's events stay on one shard (per-entity order) and the worker's entities spread over its shards.
        """
        return self._keys(self.index.locate(lon, lat, entity_ids), entity_ids)

    def targets_for(self, lon: npt.ArrayLike, lat: npt.ArrayLike, entity_ids: Sequence[str]) -> list[Target]:
        """Like :meth:`hash_keys_for`, with the stream and the slot label of each point's worker (state handoff)."""
        idx = self.index.locate(lon, lat, entity_ids)
        keys = self._keys(idx, entity_ids)
        labels = self.labels[idx]
        return [Target(self.stream_name, k, str(lb)) for k, lb in zip(keys, labels, strict=True)]

    def _keys(self, idx: npt.NDArray[np.int64], entity_ids: Sequence[str]) -> list[str]:
        if self.shard_keys is None:
            return list(self.hash_keys[idx])
        k = self.shards[idx]
        col = np.zeros(len(idx), dtype=np.int64)
        multi = np.flatnonzero(k > 1)
        if multi.size:
            col[multi] = entity_shards([entity_ids[j] for j in multi.tolist()], k[multi])
        return list(self.shard_keys[idx, col])


class ActiveSpecCache:
    """The active routing table: control ``pk="active"`` re-read on every call (``ttl_s`` 0, the default) or at most
    every ``ttl_s`` seconds; the spec is read and parsed again only when the version changes."""

    def __init__(self, control: ControlTable, specs: SpecStore, ttl_s: float = 0.0,
                 clock: Clock = time.monotonic) -> None:
        self._control = control
        self._specs = specs
        self.ttl_s = ttl_s
        self._clock = clock
        self._table: RoutingTable | None = None
        self._checked_at = -float("inf")

    def current(self) -> RoutingTable | None:
        """Return the active routing table (None while no spec is active)."""
        now = self._clock()
        if now - self._checked_at < self.ttl_s and self._table is not None:
            return self._table
        return self._refresh(now)

    def active_version(self) -> int | None:
        """The active version now: ``pk="active"`` read again whatever the TTL (the flip fence,
        :func:`fence_flip`), the table following it."""
        table = self._refresh(self._clock())
        return None if table is None else table.version

    def _refresh(self, now: float) -> RoutingTable | None:
        active = read_active(self._control)
        self._checked_at = now
        if active is None:
            self._table = None
        elif self._table is None or self._table.version != active.version:
            self._table = RoutingTable(self._specs.get(active.spec_key), active.stream_name)
        return self._table


def route_batch(records: Sequence[InputRecord], table: RoutingTable | None, streams: GeoStreams,
                quarantine: QuarantineSink, fields: EventFields = DEFAULT_EVENT_FIELDS,
                ledger: RouterLedger | None = None, seen: PointsSeen | None = None) -> RouteResult:
    """Route one batch; every record ends up put, quarantined, or listed in ``failed_ids``.

    Parameters
    ----------
    records : sequence of InputRecord
    table : RoutingTable or None
        The active spec; None (nothing active yet) fails every valid record so it is retried.
    streams : GeoStreams
    quarantine : QuarantineSink
    fields : EventFields
        Which JSON key holds each event field (``EVENT_FIELDS``); the record put is the original bytes either way.
    ledger : RouterLedger, optional
        The ingest shard's ledger when state handoff is on (``STATE_HANDOFF``): events are put stamped, with
        markers where an entity changes slot (:mod:`lambdas.router.stateful`).
    seen : callable, optional
        Given the valid events' points (lon, lat) once ``table`` routes them (the surge meter).

    Returns
    -------
    RouteResult
    """
    valid: list[tuple[InputRecord, ValidEvent]] = []
    rejected: list[tuple[InputRecord, Rejection]] = []
    for rec in records:
        parsed = parse_event(rec.data, fields) if rec.rejected is None else Rejection(rec.rejected, rec.data)
        if isinstance(parsed, ValidEvent):
            valid.append((rec, parsed))
        else:
            rejected.append((rec, parsed))
    failed: list[str] = []
    reasons: list[str] = []
    quarantined = 0
    if rejected:
        stamp = now_iso()
        try:
            quarantine.write([quarantine_record(rj, rec.source, stamp) for rec, rj in rejected])
            quarantined = len(rejected)
        except AdapterError as exc:
            failed += [rec.item_id for rec, _ in rejected]
            reasons.append(str(exc))
    if not valid:
        return RouteResult(tuple(failed), 0, quarantined, table.version if table else None, tuple(reasons))
    if table is None:
        reasons.append("no active spec (control pk='active' missing): valid records left for retry")
        return RouteResult(tuple(failed + [rec.item_id for rec, _ in valid]), 0, quarantined, None, tuple(reasons))
    lon, lat = _points(valid, seen)
    if ledger is not None:
        bad_ids, routed, why = _route_with_ledger(valid, lon, lat, table, streams, ledger)
    else:
        bad_ids, routed, why = _route_plain(valid, lon, lat, table, streams)
    bad = set(bad_ids)
    return RouteResult(tuple(failed + bad_ids), routed, quarantined, table.version, tuple(reasons + why),
                       tuple(rec.item_id for rec, _ in valid if rec.item_id not in bad))


def _route_plain(valid: Sequence[tuple[InputRecord, ValidEvent]], lon: npt.NDArray[np.float64],
                 lat: npt.NDArray[np.float64], table: RoutingTable, streams: GeoStreams
                 ) -> tuple[list[str], int, list[str]]:
    """Put the valid records as they came, in entity order; return (failed item ids, events put, reasons)."""
    keys = table.hash_keys_for(lon, lat, [ev.entity_id for _, ev in valid])
    entries = [PutEntry(ev.raw, ev.entity_id, key) for (_, ev), key in zip(valid, keys, strict=True)]
    put_failed = put_in_entity_order(streams, table.stream_name, entries)
    reasons = [f"{len(put_failed)} of {len(entries)} records to {table.stream_name!r} not put (a failed put and its "
               f"entity's later records)"] if put_failed else []
    return [valid[i][0].item_id for i in put_failed], len(entries) - len(put_failed), reasons


def fence_flip(result: RouteResult, active: int | None) -> RouteResult:
    """The batch's result once ``pk="active"`` was read again after its puts (``active``): unchanged while the
    version it was routed by is still active, else every record it routed reported failed, to be re-delivered.

    Parameters
    ----------
    result : RouteResult
        What :func:`route_batch` did, routed by ``result.version``.
    active : int or None
        The active version read (strongly consistent) after the batch's last put returned.

    Returns
    -------
    RouteResult

    Notes
    -----
    A blue worker drains once it has seen the flip and read nothing for ``DRAIN_QUIET_S``, then its slot is
    retired: a record that lands in blue's stream after that is read by no one. An invocation that read ``active``
    before a flip and put after it (a paced catch-up batch, a slow machine) could land records there; a time bound
    on the invocation is no guarantee. The fence is exact instead: if the version is still active after the last
    put returned, the flip comes after every put landed, blue reads them before it drains, and nothing is lost. If
    it moved, the records are reported failed: the event source mapping re-delivers them (no later record of their
    entities is routed first: one shard's batches run in order, https://docs.aws.amazon.com/lambda/latest/dg/
    with-kinesis.html) and they are routed by the new version. A record blue did read is then processed twice:
    at least once, as everywhere, deduplicated by ``event_id`` (a stateful slot skips a stamp it applied). Costs
    one more strongly consistent read per invocation that put records. With state handoff the caller rolls its
    ledger back (:mod:`lambdas.router.handler`), so the records are put again, stamped and with markers, as new;
    a marker the fenced try already put can hand an entity's state to a slot the re-delivery does not choose
    (that slot's gate then waits out ``wait_s`` and counts the state lost: the oracle shows it).
    """
    if result.version is None or not result.put_ids or active == result.version:
        return result
    why = (f"active moved from v{result.version} to v{active} while this batch was routed by v{result.version}: its "
           f"{len(result.put_ids)} records are reported failed and re-delivered (blue may have drained before they "
           f"landed)")
    return replace(result, failed_ids=result.failed_ids + result.put_ids, routed=0, put_ids=(),
                   reasons=(*result.reasons, why))


def _points(valid: Sequence[tuple[InputRecord, ValidEvent]], seen: PointsSeen | None
            ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The valid events' longitudes and latitudes, handed to ``seen`` when given."""
    lon = np.fromiter((ev.lon for _, ev in valid), dtype=np.float64, count=len(valid))
    lat = np.fromiter((ev.lat for _, ev in valid), dtype=np.float64, count=len(valid))
    if seen is not None:
        seen(lon, lat)
    return lon, lat


def put_in_entity_order(streams: GeoStreams, stream: str, entries: Sequence[PutEntry]) -> list[int]:
    """Put ``entries`` (ingest order) in waves of one per entity (:mod:`lambdas.router.waves`); the indices not put:
    each failed one and every later one of its entity, so each entity's records reach the stream in order."""
    blocked: set[str] = set()
    done: set[int] = set()
    for wave in entity_waves(range(len(entries)), lambda i: entries[i].partition_key, blocked):
        bad = set(streams.put_records(stream, [entries[i] for i in wave]))
        for k, i in enumerate(wave):
            if k in bad:
                blocked.add(entries[i].partition_key)
            else:
                done.add(i)
    return [i for i in range(len(entries)) if i not in done]


def _route_with_ledger(valid: Sequence[tuple[InputRecord, ValidEvent]], lon: npt.NDArray[np.float64],
                       lat: npt.NDArray[np.float64], table: RoutingTable, streams: GeoStreams,
                       ledger: RouterLedger) -> tuple[list[str], int, list[str]]:
    """State handoff: put the valid records stamped, with markers (:func:`lambdas.router.stateful.route_stamped`)."""
    targets = table.targets_for(lon, lat, [ev.entity_id for _, ev in valid])
    items = [Routed(rec.item_id, ingest_order(rec.item_id, rec.source), ev, t)
             for (rec, ev), t in zip(valid, targets, strict=True)]
    return route_stamped(items, streams, ledger)
