"""Router Lambda: Kinesis event source on the ingest stream, ``ReportBatchItemFailures`` on.

Entry point ``lambdas/router/handler.py:handler``. Env: ``CONTROL_TABLE``, ``SPECS_BUCKET``,
``QUARANTINE_BUCKET``, optional ``ROUTER_SPEC_TTL_S`` (0: no cache) and ``AWS_ENDPOINT_URL`` (local).
Returns ``{"batchItemFailures": [{"itemIdentifier": <sequenceNumber>}, ...]}``: invalid events are
quarantined (not failures); records whose put failed are reported, never dropped.

A KPL aggregated record (:mod:`geokernel.contracts.kpl`) is split into its user records, each routed, quarantined
(``source`` ``<stream>/<shard>/<seq>/sub=<index>``) or failed on its own; a failure reports the parent's sequence
number (what the event source mapping checkpoints), so the whole parent is re-delivered. One that does not decode
is quarantined whole as ``corrupt_kpl_record`` (its ``raw`` the record's base64).

The geo-stream puts are made by a client without SDK retries (:func:`put_client`). A put the SDK retries after a
throttle (``ProvisionedThroughputExceededException``) backs off for seconds and can land in the stream of a version
that was flipped away from meanwhile, after its workers drained: those records would be read by no one.
Reported as failures instead, they are re-delivered by the event source mapping and routed with the active spec of
that moment. The same holds for a whole invocation that read ``active`` before a flip and put after it: **the flip
fence** (:func:`lambdas.router.routing.fence_flip`) reads ``active`` again after the batch's puts and, if it moved,
reports every record the batch routed as failed (found looking for why a loaded CI run of the whole-mode faults
lost 286 of its last 1,234 events; that this race was the cause was not shown: three loaded runs did not lose one).

A batch that is behind (its oldest record older than :data:`lambdas.runtime.pacing.CATCHUP_AGE_S`: a backlog after
the first deploy or an outage) is put paced, so the routers together give no geo shard more than its share of the
write quota (:mod:`lambdas.runtime.pacing`); the ingest stream's open shards (``ListShards``, once per environment
and stream) times ``ROUTER_PARALLELISM`` is how many routers share it.

Each execution environment also runs the fast path's surge meter on what it routes (:mod:`lambdas.router.surge`,
``SURGE_JSON``; ``off``: none) and puts a signal for each worker it sees heading past its cap to the specs bucket
(:class:`lambdas.runtime.s3.SurgeStore`, once per key); a signal that cannot be put is logged, never a batch failure.
"""

from __future__ import annotations

import base64
import binascii
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit

from geokernel.contracts.env import EnvVar
from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from geokernel.contracts.events import ReasonCode
from geokernel.contracts.kpl import KplError, deaggregate, is_aggregated, sub_record_source
from geokernel.contracts.metric_names import Metric, MetricService
from geokernel.contracts.surge import SurgeSignal
from geokernel.surge.meter import SurgeSettings
from lambdas.router.ledger import LedgerStore
from lambdas.router.routing import ActiveSpecCache, InputRecord, PointsSeen, RoutingTable, fence_flip, route_batch
from lambdas.router.surge import SurgeWatch
from lambdas.runtime.clients import client_limits, make_clients
from lambdas.runtime.config import SURGE_OFF, LambdaConfig
from lambdas.runtime.dynamodb import ControlTable
from lambdas.runtime.errors import AdapterError
from lambdas.runtime.kinesis import GeoStreams
from lambdas.runtime.metrics import function_metrics
from lambdas.runtime.pacing import CATCHUP_AGE_S, PaceBudget, Pacer, oldest_arrival
from lambdas.runtime.s3 import QuarantineSink, SpecStore, SurgeStore

logger = Logger(service=MetricService.ROUTER.value)
metrics = function_metrics(MetricService.ROUTER)


@dataclass(frozen=True)
class Runtime:
    """What the handler builds once per container."""

    cache: ActiveSpecCache
    streams: GeoStreams
    quarantine: QuarantineSink
    fields: EventFields = DEFAULT_EVENT_FIELDS  # EVENT_FIELDS: which key of an event holds each field
    ledgers: LedgerStore | None = None  # STATE_HANDOFF=1: each ingest shard's ledger (lambdas.router.stateful)
    routers: Callable[[str], int] = lambda stream: 1  # how many invocations may run at once on ``stream``
    surge: SurgeWatch | None = None  # SURGE_JSON: this environment's surge meter (None: "off")
    signals: SurgeStore | None = None  # where its signals are put


@functools.cache
def runtime() -> Runtime:
    """Build clients and adapters once (call ``runtime.cache_clear()`` to rebuild, e.g. in tests)."""
    cfg = LambdaConfig.from_env().require(EnvVar.CONTROL_TABLE, EnvVar.SPECS_BUCKET, EnvVar.QUARANTINE_BUCKET)
    clients = make_clients(cfg)
    cache = ActiveSpecCache(ControlTable(clients.dynamodb, cfg.control_table), SpecStore(clients.s3, cfg.specs_bucket),
                            ttl_s=cfg.router_spec_ttl_s)
    listing = GeoStreams(clients.kinesis)  # ListShards of the ingest stream (ledgers and pacing)
    ledgers = LedgerStore(clients.s3, cfg.specs_bucket, listing.shards) if cfg.state_handoff else None

    @functools.cache
    def routers(stream: str) -> int:
        """The ingest stream's open shards times the parallelization factor (read once per environment; if the
        shards cannot be listed, one router: pacing then only keeps each invocation to the whole share)."""
        try:
            return max(1, sum(not s.closed for s in listing.shards(stream))) * cfg.router_parallelism
        except AdapterError as exc:
            logger.warning("cannot count the routers sharing a geo shard; pacing as one", extra={"reason": str(exc)})
            return cfg.router_parallelism

    watch = None if cfg.surge_json == SURGE_OFF else SurgeWatch(SurgeSettings.from_json(cfg.surge_json))
    return Runtime(cache, GeoStreams(put_client(cfg)), QuarantineSink(clients.s3, cfg.quarantine_bucket, "router"),
                   cfg.event_fields, ledgers, routers, watch, SurgeStore(clients.s3, cfg.specs_bucket))


def pacer_for(event: dict[str, Any], routers: Callable[[str], int], now: float) -> Pacer | None:
    """A :class:`~lambdas.runtime.pacing.Pacer` for a batch that is behind (see the module docstring), else None."""
    oldest, source = oldest_arrival(event), ingest_shard_of(event)
    if oldest is None or source is None or now - oldest <= CATCHUP_AGE_S:
        return None
    return Pacer(PaceBudget.shared(routers(source[0])))


def put_client(cfg: LambdaConfig) -> Any:
    """A Kinesis client whose calls are tried once (see the module docstring): a failed put is a batch item failure."""
    kw: dict[str, Any] = {"region_name": cfg.region, "config": client_limits(cfg.function_timeout_s, 1).config()}
    if cfg.endpoint_url:
        kw["endpoint_url"] = cfg.endpoint_url
    return boto3.client("kinesis", **kw)


def parse_kinesis_event(event: dict[str, Any]) -> list[InputRecord]:
    """Return the user records of a Kinesis Lambda event (payload base64-decoded; item id = sequence number).

    A KPL aggregated record gives one record per user record, all with the parent's sequence number as item id
    (:func:`user_records`).
    """
    records: list[InputRecord] = []
    for r in event.get("Records", []):
        k = r.get("kinesis", {})
        seq = str(k.get("sequenceNumber", ""))
        source = f"{r.get('eventSourceARN', '?')}/{r.get('eventID', '?').split(':')[0]}/{seq}"
        try:
            data = base64.b64decode(k.get("data", ""), validate=True)
        except (binascii.Error, ValueError):
            # the payload is not even base64: quarantine it as unparsable rather than failing the batch forever
            data = str(k.get("data", "")).encode()
        records.extend(user_records(InputRecord(seq, data, source)))
    return records


def ingest_shard_of(event: dict[str, Any]) -> tuple[str, str] | None:
    """The batch's ingest stream and shard id (from its first record; a batch holds one shard's), or None if empty."""
    for r in event.get("Records", []):
        return stream_name_of(str(r.get("eventSourceARN", "?"))), str(r.get("eventID", "?")).split(":")[0]
    return None


def stream_name_of(arn: str) -> str:
    """The stream's name in a stream ARN (``...:stream/<name>``) or in an enhanced fan-out consumer's
    (``...:stream/<name>/consumer/<consumer>:<created>``, the router reading through one: infra/router.py)."""
    parts = arn.split(":", 5)[-1].split("/")
    return parts[1] if len(parts) > 1 and parts[0] == "stream" else arn.rsplit("/", 1)[-1]


def user_records(record: InputRecord) -> list[InputRecord]:
    """``record`` itself, or the user records of a KPL aggregated one (sources ``<source>/sub=<index>``).

    An aggregated record that does not decode is returned once, its base64 as data, rejected as
    ``corrupt_kpl_record`` with the decoder's message (never retried: the same bytes would fail again).
    """
    if not is_aggregated(record.data):
        return [record]
    try:
        payloads = deaggregate(record.data, record.source)
    except KplError as exc:
        return [InputRecord(record.item_id, base64.b64encode(record.data), record.source,
                            f"{ReasonCode.CORRUPT_KPL_RECORD}: {exc}")]
    return [InputRecord(record.item_id, p, sub_record_source(record.source, i)) for i, p in enumerate(payloads)]


def surge_feed(rt: Runtime, table: RoutingTable | None, found: list[SurgeSignal]) -> PointsSeen | None:
    """The batch's feed of this environment's surge meter (None without a meter or a table): signals into ``found``."""
    watch = rt.surge
    if watch is None or table is None:
        return None
    return lambda lon, lat: found.extend(watch.observe(table, lon, lat))


def put_signals(rt: Runtime, signals: list[SurgeSignal]) -> None:
    """Put each signal once (another environment's may be there already); a failed put is logged, not raised."""
    if rt.signals is None:
        return
    for s in signals:
        extra = {"signal": s.key, "worker": s.worker, "spec_version": s.version,
                 "measured": round(s.measured / s.cap, 3), "projected": round(s.projected / s.cap, 3),
                 "cells": [c.quadkey for c in s.cells]}
        try:
            first = rt.signals.put_signal(s)
        except AdapterError as exc:
            logger.warning("surge signal not put", extra={**extra, "reason": str(exc)})
            continue
        if first:
            metrics.add_metric(name=Metric.SURGE_SIGNALS, unit=MetricUnit.Count, value=1)
        logger.info("surge signal" if first else "surge signal already put by another environment", extra=extra)


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Route one Kinesis batch; report per-record failures."""
    records = parse_kinesis_event(event)
    rt = runtime()
    table = rt.cache.current()
    shard = ingest_shard_of(event) if rt.ledgers is not None else None
    ledger = rt.ledgers.load(*shard) if rt.ledgers is not None and shard is not None else None
    pacer = pacer_for(event, rt.routers, time.time()) if table is not None else None
    streams = rt.streams.paced(pacer)
    found: list[SurgeSignal] = []
    if ledger is not None:
        ledger.begin_batch()
    result = route_batch(records, table, streams, rt.quarantine, rt.fields, ledger,
                         surge_feed(rt, table, found) if pacer is None else None)
    if result.put_ids:  # the flip fence (routing.fence_flip): one more strongly consistent read
        fenced = fence_flip(result, rt.cache.active_version())
        if fenced is not result and ledger is not None:
            ledger.rollback()  # re-delivered records are routed afresh, stamps and all
        result = fenced
    if rt.ledgers is not None and shard is not None and ledger is not None:
        rt.ledgers.save(*shard, ledger)  # before the batch is acknowledged (a failed save fails the invocation)
    failed = list(dict.fromkeys(result.failed_ids))
    metrics.add_metric(name=Metric.ROUTED, unit=MetricUnit.Count, value=result.routed)
    metrics.add_metric(name=Metric.QUARANTINED, unit=MetricUnit.Count, value=result.quarantined)
    metrics.add_metric(name=Metric.ROUTE_FAILURES, unit=MetricUnit.Count, value=len(failed))
    metrics.add_metric(name=Metric.GEO_WRITE_THROTTLED, unit=MetricUnit.Count, value=streams.throttled)
    for reason in result.reasons:
        logger.warning("routing problem", extra={"reason": reason, "spec_version": result.version})
    put_signals(rt, found)
    logger.info("batch routed", extra={"records": len(records), "routed": result.routed,
                                       "quarantined": result.quarantined, "failed": len(failed),
                                       "spec_version": result.version,
                                       "paced_s": round(pacer.waited_s, 3) if pacer is not None else None})
    return {"batchItemFailures": [{"itemIdentifier": i} for i in failed]}
