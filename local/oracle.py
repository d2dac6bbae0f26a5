"""The oracle: what one process running the transform over the whole world would have written, compared with the fleet.

:func:`expected_fields` runs the run's transform (``GEO_TRANSFORM``, the local run's ``--transform``) once over
every valid event the replay sent, in the producer's send order (which is each entity's order: the ingest stream
is keyed by ``entity_id`` and the router keeps an entity on one shard), with the catch-all region
(``load_region([""], ring)``) and, for a stateful transform, one :class:`~geo_service.entity.store.EntityStates` for all
entities. Each event's expected record fields are the event's own fields and the transform's, as the worker
merges them (:func:`geo_service.pipeline.records.enriched_record`), after a JSON round trip.

:func:`compare` then checks the fleet's enriched records (after dedupe by ``event_id``) against them:

* **missing**: an event sent with no record (the delivery invariant names them too);
* **spurious**: a record whose event was not sent;
* **differing**: an event one of whose records has a field that differs from the expectation (a duplicate copy is
  compared too, so two copies that disagree always count); ``inconsistent_duplicates`` counts the events whose
  copies disagree with each other;
* **out of order**: consecutive events of one entity (in send order) whose records were processed in the other
  order (the batches' ``processed_at``; copies: the earliest). An entity whose points straddle a region border
  is read from two shards by two workers, so across workers this is normal (and reported); within one slot of one
  process (``same_slot_out_of_order``) the entity's events reached its worker out of order (the router's puts keep
  each entity's order, :mod:`lambdas.router.waves`): that fails the run, stateful or not (a stateless transform's
  downstream sees the entity's events in the wrong order). Across versions the swap checks hold the order.

The reference run also counts its events per hour of their time (``hours``): what a query of each hour of the
output must answer after dedupe (:mod:`local.report.product`).

Both must match exactly: a stateful transform's state follows each entity to its next slot (the local loop routes
with ``STATE_HANDOFF=1`` for it, :mod:`geo_service.entity.handoff`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from geo_service.entity.store import store_for
from geo_service.pipeline.records import BadRecord, decode_event
from geo_service.pipeline.transform import GeoTransform, load_transform, stateful_of, transform_name
from geokernel.contracts.enriched import ROUTING_FIELDS, EnrichedRecord, event_hour
from geokernel.timestamps import event_time_ms

#: Differences listed in the report (the counts cover all of them).
EXAMPLES = 5
_ABSENT = "<absent>"


@dataclass(frozen=True)
class Difference:
    """One field of one record that is not what the reference run expects (``got`` of the fleet's copy)."""

    event_id: str
    entity: str
    field: str
    expected: Any
    got: Any


@dataclass(frozen=True)
class Expected:
    """The reference run's record fields per event (in send order) and each event's entity; ``filled`` counts, per
    field the transform added, the events where it is not empty (None, ``[]``, ``{}`` or ``""``); ``hours`` the
    events per hour of their time (its start, epoch ms: the output partition each lands in)."""

    fields: dict[str, dict[str, Any]]
    entity: dict[str, str]
    order: tuple[str, ...]
    filled: dict[str, int] = field(default_factory=dict)
    hours: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class OracleResult:
    """What :func:`compare` found (see the module docstring); ``seconds`` is the reference pass's wall time."""

    transform: str
    stateful: bool
    compared: int
    missing: int
    spurious: int
    differing: int
    inconsistent_duplicates: int
    out_of_order: int
    same_slot_out_of_order: int
    examples: tuple[Difference, ...]
    seconds: float = 0.0
    #: A few pairs processed out of send order: where and when each of the two records was processed.
    order_examples: tuple[str, ...] = ()
    #: ``(field, events where the reference run filled it)`` per field the transform added, by name.
    filled: tuple[tuple[str, int], ...] = ()
    #: ``(hour, events)``: the expected events per hour of their time (its start, epoch ms), by hour.
    hours: tuple[tuple[int, int], ...] = ()

    def filled_line(self) -> str:
        """What the transform added on this data, and which of its fields it never filled (the data gave it nothing)."""
        events = self.compared + self.missing
        if not self.filled:
            return f"the transform added no field to any of the {events:,} events (reference run)"
        counts = ", ".join(f"{k} in {n:,}" for k, n in self.filled)
        empty = [k for k, n in self.filled if n == 0]
        note = (f"; {', '.join(empty)} empty in every event: the transform found nothing for "
                f"{'it' if len(empty) == 1 else 'them'} on this data") if empty else ""
        return f"what the transform added (reference run, {events:,} events): {counts}{note}"

    @property
    def ok(self) -> bool:
        return (self.missing == 0 and self.spurious == 0 and self.differing == 0
                and not self.same_slot_out_of_order)

    def line(self) -> str:
        """The one-line summary the report prints."""
        kind = "stateful" if self.stateful else "stateless"
        return (f"ORACLE {'OK' if self.ok else 'FAILED'}: {self.transform} ({kind}): {self.compared} events compared, "
                f"{self.missing} missing, {self.spurious} spurious, {self.differing} differing "
                f"({self.inconsistent_duplicates} with disagreeing duplicates), {self.out_of_order} entity pairs "
                f"processed out of send order ({self.same_slot_out_of_order} within one slot); reference pass "
                f"{self.seconds:.1f}s")


def expected_fields(transform: GeoTransform, sent: Iterable[Mapping[str, Any]]) -> Expected:
    """Run ``transform`` (already loaded) over ``sent`` in order; the expected record fields of each valid event.

    An event the worker's decoder rejects is skipped (it is quarantined, not enriched); one the transform raises on
    is expected nowhere (the worker quarantines it), so a record of it counts as spurious.
    """
    stateful = stateful_of(transform)
    apply = transform.apply if stateful is None else store_for(transform).applier(stateful)
    fields: dict[str, dict[str, Any]] = {}
    entity: dict[str, str] = {}
    order: list[str] = []
    filled: dict[str, int] = {}
    hours: dict[int, int] = {}
    for n, raw in enumerate(sent):
        ev = decode_event(json.dumps(raw).encode(), f"sent event #{n}")
        if isinstance(ev, BadRecord):
            continue
        try:
            added = apply(ev.fields)
        except Exception:  # the worker quarantines it (transform_error): no record expected
            continue
        for k, v in added.items():
            filled[k] = filled.get(k, 0) + (v not in (None, [], {}, ""))
        merged = {k: v for k, v in {**ev.fields, **added}.items() if k not in ROUTING_FIELDS}
        fields[ev.event_id] = json.loads(json.dumps(merged, default=str))
        entity[ev.event_id] = ev.entity_id
        order.append(ev.event_id)
        hour = event_hour(event_time_ms(ev.fields))
        hours[hour] = hours.get(hour, 0) + 1
    return Expected(fields, entity, tuple(order), filled, hours)


def _field_diffs(event_id: str, entity: str, want: Mapping[str, Any], got: Mapping[str, Any]) -> list[Difference]:
    return [Difference(event_id, entity, k, want.get(k, _ABSENT), got.get(k, _ABSENT))
            for k in sorted(want.keys() | got.keys()) if want.get(k, _ABSENT) != got.get(k, _ABSENT)]


def compare(expected: Expected, records: Iterable[EnrichedRecord], *, transform: str = "",
            stateful: bool = False) -> OracleResult:
    """Compare the fleet's ``records`` with ``expected`` (see the module docstring)."""
    copies: dict[str, list[EnrichedRecord]] = {}
    for r in records:
        copies.setdefault(r.event_id, []).append(r)
    missing = sum(1 for e in expected.order if e not in copies)
    spurious = sum(1 for e in copies if e not in expected.fields)
    differing = inconsistent = 0
    examples: list[Difference] = []
    for eid in expected.order:
        got = copies.get(eid)
        if not got:
            continue
        diffs = [d for r in got for d in _field_diffs(eid, expected.entity[eid], expected.fields[eid], r.fields)]
        if diffs:
            differing += 1
            examples += diffs[:EXAMPLES - len(examples)]
        if any(dict(r.fields) != dict(got[0].fields) for r in got[1:]):
            inconsistent += 1
    compared = len(expected.order) - missing
    count, same, order_examples = out_of_order(expected, copies)
    return OracleResult(transform, stateful, compared, missing, spurious, differing, inconsistent, count, same,
                        tuple(examples), order_examples=order_examples, filled=tuple(sorted(expected.filled.items())),
                        hours=tuple(sorted(expected.hours.items())))


def out_of_order(expected: Expected,
                 copies: Mapping[str, Sequence[EnrichedRecord]]) -> tuple[int, int, tuple[str, ...]]:
    """Consecutive events of one entity (send order) whose records were processed in the other order: all such
    pairs, those whose two records came from the same slot (``worker_id``) of the same process (``owner``), and up
    to :data:`EXAMPLES` of them described (event, slot, spec version, owner, ``processed_at``)."""
    last: dict[str, tuple[int, str, EnrichedRecord]] = {}
    count = same = 0
    examples: list[str] = []
    for eid in expected.order:
        done = [r for r in copies.get(eid, ()) if r.processed_at is not None]
        if not done:
            continue
        first = min(done, key=lambda r: r.processed_at or 0)
        at = first.processed_at or 0
        entity = expected.entity[eid]
        if entity in last and at < last[entity][0]:
            _, prev_id, prev = last[entity]
            count += 1
            same += (prev.worker_id, prev.owner) == (first.worker_id, first.owner)
            if len(examples) < EXAMPLES:
                examples.append(f"entity {entity!r}: {eid!r} ({_where(first)}) before {prev_id!r} ({_where(prev)})")
        last[entity] = (at, eid, first)
    return count, same, tuple(examples)


def _where(record: EnrichedRecord) -> str:
    return f"v{record.spec_version} {record.worker_id} of {record.owner}, processed_at {record.processed_at}"


def run_oracle(spec: str, sent: Sequence[Mapping[str, Any]], records: Sequence[EnrichedRecord],
               buffer_ring: int = 1) -> OracleResult:
    """Build ``spec`` (``module:Class``), load the whole world, run it over ``sent`` and compare with ``records``.

    Raises
    ------
    geo_service.pipeline.transform.TransformError
        ``spec`` cannot be loaded.
    """
    started = time.perf_counter()
    transform = load_transform(spec)
    transform.load_region([""], buffer_ring)
    expected = expected_fields(transform, sent)
    seconds = time.perf_counter() - started
    result = compare(expected, records, transform=transform_name(transform), stateful=stateful_of(transform) is not None)
    return replace(result, seconds=seconds)
