"""Routing with state handoff (``STATE_HANDOFF=1``): number each entity's events, stamp them, mark departures.

Per ingest shard the router keeps a :class:`RouterLedger`: for each entity the number ``n`` of its last routed
event, that event's place in the ingest shard (so a retried batch does not route it twice) and the slot it went to.
:func:`route_stamped` puts every event stamped with ``n`` and the previous slot, and when the slot changes it first
puts a marker behind the entity's previous event in the old slot's shard (``geokernel.contracts.handoff``).

Per-entity order holds although ``PutRecords`` does not keep order across a partial failure: the batch goes out in
waves of at most one event per entity (:mod:`lambdas.router.waves`), and an entity whose marker or event failed sends
nothing more in this batch (its records are reported failed and retried in order).

The ledger (:mod:`lambdas.router.ledger`) is read from S3 at the start of each invocation (a conditional GET:
``304 Not Modified`` when this environment's copy is current) and saved after the batch (a conditional PUT), before
the records are acknowledged: a retry after a crash re-stamps the same events alike, in whichever environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from geokernel.contracts.handoff import Marker, Stamp, encode_marker, encode_stamped
from geokernel.contracts.kpl import SUB_RECORD_MARK
from geokernel.events import ValidEvent
from lambdas.router.ledger import LedgerEntry, RouterLedger, Target
from lambdas.router.waves import entity_waves
from lambdas.runtime.kinesis import GeoStreams, PutEntry


@dataclass(frozen=True, slots=True)
class Routed:
    """One valid record to route: its batch item id, its place in the ingest shard, the event and its target."""

    item_id: str
    order: tuple[int, int]
    event: ValidEvent
    target: Target


def ingest_order(item_id: str, source: str) -> tuple[int, int]:
    """A record's place in its ingest shard: (sequence number, sub-record index of a KPL aggregate)."""
    seq = int(item_id) if item_id.isdigit() else 0
    _, mark, sub = source.rpartition(SUB_RECORD_MARK)
    return seq, int(sub) if mark and sub.isdigit() else 0


def route_stamped(items: Sequence[Routed], streams: GeoStreams, ledger: RouterLedger) -> tuple[list[str], int, list[str]]:
    """Put ``items`` (in ingest order) stamped, with markers; return (failed item ids, events put, reasons).

    An item at or before its entity's last routed place was routed by an earlier try of this batch: it counts as
    routed and is not put again.
    """
    pending: dict[str, list[Routed]] = {}
    routed = 0
    for it in items:
        last = ledger.entries.get(it.event.entity_id)
        if last is not None and it.order <= last.order:
            routed += 1
            continue
        pending.setdefault(it.event.entity_id, []).append(it)
    failed: list[str] = []
    reasons: list[str] = []
    blocked: set[str] = set()
    todo = [it for v in pending.values() for it in v]
    for wave in entity_waves(todo, lambda it: it.event.entity_id, blocked):
        moving = [(it, ledger.entries[it.event.entity_id]) for it in wave
                  if it.event.entity_id in ledger.entries
                  and ledger.entries[it.event.entity_id].target.label != it.target.label]
        for it in _put_markers(moving, streams, reasons, ledger.gone_streams):
            blocked.add(it.event.entity_id)
        sendable = [it for it in wave if it.event.entity_id not in blocked]
        by_stream: dict[str, list[Routed]] = {}
        for it in sendable:
            by_stream.setdefault(it.target.stream, []).append(it)
        for stream, group in by_stream.items():
            entries: list[PutEntry] = []
            stamps: list[int] = []
            for it in group:
                last = ledger.entries.get(it.event.entity_id)
                n = 1 if last is None else last.n + 1
                stamp = Stamp(n, None if last is None else last.target.label)
                entries.append(PutEntry(encode_stamped(stamp, it.event.raw), it.event.entity_id, it.target.hash_key))
                stamps.append(n)
            bad = set(streams.put_records(stream, entries))
            if bad:
                reasons.append(f"{len(bad)} of {len(entries)} stamped puts to {stream!r} failed")
            for i, (it, n) in enumerate(zip(group, stamps, strict=True)):
                if i in bad:
                    blocked.add(it.event.entity_id)
                    continue
                ledger.record(it.event.entity_id, LedgerEntry(n, it.order, it.target))
                routed += 1
    for e in blocked:
        done = ledger.entries.get(e)
        failed += [it.item_id for it in pending.get(e, []) if done is None or it.order > done.order]
    return failed, routed, reasons


def _put_markers(moving: Sequence[tuple[Routed, LedgerEntry]], streams: GeoStreams,
                 reasons: list[str], gone: set[str]) -> list[Routed]:
    """Put one marker per moving entity to the shard of its previous event; return the items whose marker failed.

    A marker to a geo stream that no longer exists is not needed: its slots drained and wrote their final states.
    Such a stream is checked once (``DescribeStreamSummary``, 20 calls/s per account) and then remembered in
    ``gone``.
    """
    by_stream: dict[str, list[tuple[Routed, LedgerEntry]]] = {}
    for it, last in moving:
        if last.target.stream not in gone:
            by_stream.setdefault(last.target.stream, []).append((it, last))
    failed: list[Routed] = []
    for stream, group in by_stream.items():
        entries = [PutEntry(encode_marker(Marker(it.event.entity_id, last.n, it.target.label)), it.event.entity_id,
                            last.target.hash_key) for it, last in group]
        bad = streams.put_records(stream, entries)
        if bad and streams.status(stream) is None:
            gone.add(stream)
            continue
        if bad:
            reasons.append(f"{len(bad)} of {len(entries)} handoff markers to {stream!r} failed")
        failed += [group[i][0] for i in bad]
    return failed
