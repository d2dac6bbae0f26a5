"""The geo worker: one per worker slot of a spec version (an ECS task in AWS, a process or thread locally).

Lifecycle (``docs/CONTRACTS.md``, "Worker lifecycle, readiness and drain"): load spec
``specs/v<version:08d>.json`` -> claim a slot lease ``v<version>#<worker_id>`` (retrying
until one is free) -> find the slot's shard of ``spec.stream_name`` (waits until the
stream exists) -> load the region plus buffer ring into the transform -> calibrate ->
``ready=true`` -> consume: decode, locate (strays are counted, logged and still
processed), transform (CPU time per quadkey), write ``enriched/v<v>/<worker>/<epoch_ms>.jsonl``,
then checkpoint (output is at-least-once) -> once the active pointer has moved past this
version, drain: no records for ``drain_quiet_s`` and ``MillisBehindLatest == 0`` ->
``drained=true``, release, exit 0. A stop request (SIGTERM) flushes costs and releases
the lease gracefully; a lost lease (taken over after expiry) stops processing and goes
back to claiming.

Usage in-process (tests, the local loop)::

    from geo_service.aws import make_clients
    from geo_service.config import WorkerConfig
    from geo_service.worker import GeoWorker

    cfg = WorkerConfig(spec_version=2, control_table="t-control", leases_table="t-leases",
                       specs_bucket="t-specs", costs_bucket="t-costs", output_bucket="t-out",
                       lease_s=3, drain_quiet_s=1, cost_report_interval_s=1, poll_interval_s=0.1,
                       active_poll_s=0.2)               # or WorkerConfig.from_env()
    worker = GeoWorker(cfg, make_clients(endpoint_url="http://127.0.0.1:5000"))
    worker.start()                                     # runs in a daemon thread
    worker.wait_ready(timeout=30)                      # lease held and ready=true
    ...                                                # put events, flip pk="active" to version 3
    status = worker.run_until(lambda s: s.state == "drained", timeout=60)
    assert status.exit_code == 0
    worker.stop()                                      # graceful release (no-op once finished)

As a process: ``python -m geo_service`` (see ``geo_service/__main__.py``).

States (``WorkerStatus.state``): ``starting``, ``claiming``, ``waiting_stream``, ``warming``,
``ready`` (consuming), ``draining``, then one final state: ``drained`` (exit 0), ``released``
(stopped on request, exit 0), ``retired`` (every slot of the version was already drained,
exit 0), ``abandoned`` (:meth:`GeoWorker.abandon`, lease left to expire), ``failed`` (exit 1).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from geo_service.aws import Clients, load_spec_from_s3, put_json, put_jsonl, read_active_version
from geo_service.config import WorkerConfig
from geo_service.consumer import Batch, ShardConsumer, StreamNotReady, shards_for_hash_key
from geo_service.cost import Calibration, CostTracker, calibrate, cost_key
from geo_service.health import HealthServer
from geo_service.lease import Clock, Lease, LeaseLost, LeaseManager
from geo_service.logs import get_logger, log
from geo_service.records import BadRecord, Event, decode_event, enriched_key, enriched_record, quarantine_key
from geo_service.transform import GeoTransform, load_transform
from partitioner.index import SpecIndex
from partitioner.spec import Spec
from partitioner.tiles import arrays_to_quadkeys, tiles_xy

FINAL_STATES = frozenset({"drained", "released", "retired", "abandoned", "failed"})


@dataclass(frozen=True)
class WorkerStatus:
    """A snapshot of a worker's progress (also the ``/health`` body)."""

    state: str
    version: int
    owner: str
    worker_id: str | None = None
    partition_ids: tuple[str, ...] = ()
    ready: bool = False
    draining: bool = False
    records_read: int = 0
    events_out: int = 0
    strays: int = 0
    quarantined: int = 0
    batches: int = 0
    cost_reports: int = 0
    places_loaded: int = 0
    leases_claimed: int = 0
    last_error: str | None = None
    exit_code: int | None = None

    @property
    def finished(self) -> bool:
        return self.state in FINAL_STATES


class WorkerExited(RuntimeError):
    """The worker finished before the awaited condition held (carries its final status)."""

    def __init__(self, status: WorkerStatus) -> None:
        super().__init__(f"worker finished in state {status.state!r} (exit {status.exit_code!r}, "
                         f"last error {status.last_error!r})")
        self.status = status


class _Outcome:
    DRAINED = "drained"
    STOPPED = "stopped"
    LOST = "lost"


def default_owner() -> str:
    """A unique owner id for this process: ``<host>:<pid>:<random>``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class GeoWorker:
    """One geo worker; see the module docstring for the lifecycle and a usage example.

    Parameters
    ----------
    config : WorkerConfig
    clients : Clients
        boto3 clients (:func:`geo_service.aws.make_clients`).
    owner : str, optional
        Lease owner id (default host:pid:random).
    clock : callable, optional
        Epoch seconds for lease times (default ``time.time``).
    transform_factory : callable, optional
        Builds the transform (default: ``load_transform(config.transform)``); called once per claimed slot.
    calibration : Calibration, optional
        Skip the start-up calibration and use this one (tests); by default calibrated once per process.
    """

    def __init__(self, config: WorkerConfig, clients: Clients, *, owner: str | None = None, clock: Clock = time.time,
                 transform_factory: Callable[[], GeoTransform] | None = None,
                 calibration: Calibration | None = None) -> None:
        self.config = config
        self.clients = clients
        self.owner = owner or default_owner()
        self.clock = clock
        self._transform_factory = transform_factory or (lambda: load_transform(config.transform))
        self._calibration = calibration
        self.leases = LeaseManager(clients.dynamodb, config.leases_table, config.spec_version, self.owner,
                                   config.lease_s, clock=clock)
        self.log = get_logger()
        self._stop = threading.Event()
        self._abandon = False
        self._lock = threading.Lock()
        self._status = WorkerStatus(state="starting", version=config.spec_version, owner=self.owner)
        self._thread: threading.Thread | None = None
        self._last_ms = 0
        self._last_cost_s = 0
        self.spec: Spec | None = None
        self.health: HealthServer | None = None

    # ------------------------------------------------------------------ control API
    def start(self) -> GeoWorker:
        """Run the worker in a daemon thread; returns self."""
        if self._thread is not None:
            raise RuntimeError(f"worker {self.owner!r} already started")
        self._thread = threading.Thread(target=self.run, name=f"geo-worker-v{self.config.spec_version}", daemon=True)
        self._thread.start()
        return self

    def request_stop(self) -> None:
        """Ask the worker to finish its batch, flush costs, release its lease and exit (SIGTERM)."""
        self._stop.set()

    def stop(self, timeout: float = 30.0) -> WorkerStatus:
        """Request a graceful stop and wait for the worker thread; returns the final status."""
        self.request_stop()
        self.join(timeout)
        return self.status()

    def abandon(self, timeout: float = 30.0) -> WorkerStatus:
        """Stop without releasing the lease, as if the process died (the lease expires; tests use this)."""
        self._abandon = True
        return self.stop(timeout)

    def join(self, timeout: float | None = None) -> None:
        """Wait for the worker thread to finish (raises TimeoutError if it does not)."""
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"worker {self.owner!r} still running after {timeout!r}s "
                                   f"(state {self.status().state!r})")

    def status(self) -> WorkerStatus:
        """The current status snapshot."""
        with self._lock:
            return self._status

    def run_until(self, predicate: Callable[[WorkerStatus], bool], timeout: float = 60.0,
                  poll_s: float = 0.05) -> WorkerStatus:
        """Start the worker if needed and wait until ``predicate(status)`` holds; return that status.

        Raises
        ------
        TimeoutError
            If the predicate does not hold within ``timeout`` seconds (names the state).
        WorkerExited
            If the worker finishes without the predicate holding.
        """
        if self._thread is None:
            self.start()
        deadline = time.monotonic() + timeout
        while True:
            st = self.status()
            if predicate(st):
                return st
            if st.finished and not (self._thread and self._thread.is_alive()):
                raise WorkerExited(st)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"worker {self.owner!r} (v{st.version}, slot {st.worker_id!r}) did not reach the "
                                   f"awaited condition in {timeout!r}s; state {st.state!r}, error {st.last_error!r}")
            time.sleep(poll_s)

    def wait_ready(self, timeout: float = 60.0) -> WorkerStatus:
        """Start if needed and wait until the worker holds a lease with ``ready=true``."""
        return self.run_until(lambda s: s.ready, timeout)

    # ------------------------------------------------------------------ main loop
    def run(self) -> int:
        """Run to completion in the calling thread; return the process exit code (0 ok, 1 failed)."""
        try:
            if self.config.health_port:
                self.health = HealthServer(lambda: asdict(self.status()), self.config.health_port)
            code = self._run()
        except Exception as exc:
            log(self.log, logging.ERROR, "worker_failed", error=f"{type(exc).__name__}: {exc}", **self._ids())
            self._safe_release()
            self._set(state="failed", last_error=f"{type(exc).__name__}: {exc}", ready=False, exit_code=1)
            code = 1
        finally:
            if self.health is not None:
                self.health.close()
        return code

    def _run(self) -> int:
        cfg = self.config
        spec = load_spec_from_s3(self.clients.s3, cfg.specs_bucket, cfg.spec_version)
        self.spec = spec
        index = SpecIndex(spec)
        slots = [cfg.worker_id] if cfg.worker_id else [w.id for w in spec.workers]
        if cfg.worker_id:
            spec.worker(cfg.worker_id)  # raises SpecError naming the slot if the spec has no such worker
        log(self.log, logging.INFO, "spec_loaded", workers=len(spec.workers), partitions=len(spec.partitions),
            stream=self._stream_name(spec), **self._ids())
        while not self._stop.is_set():
            lease = self._claim(slots)
            if lease is None:
                if self._stop.is_set():
                    break
                self._set(state="retired", exit_code=0)
                log(self.log, logging.INFO, "version_retired", slots=slots, **self._ids())
                return 0
            outcome = self._serve_lease(spec, index, lease)
            if outcome == _Outcome.DRAINED:
                self._set(state="drained", ready=False, exit_code=0)
                return 0
            if outcome == _Outcome.LOST:
                log(self.log, logging.WARNING, "lease_lost", **self._ids())
                self._set(ready=False, draining=False, worker_id=None, partition_ids=())
                continue
            break
        if self._abandon:
            self.leases.forget()
            self._set(state="abandoned", ready=False, exit_code=0)
            return 0
        self._safe_release()
        self._set(state="released", ready=False, exit_code=0)
        log(self.log, logging.INFO, "worker_stopped", **self._ids())
        return 0

    # ------------------------------------------------------------------ claiming
    def _claim(self, slots: Sequence[str]) -> Lease | None:
        """Claim a slot, retrying every heartbeat period; None when stopping or every slot is drained."""
        self._set(state="claiming")
        while not self._stop.is_set():
            lease = self.leases.claim_any(slots)
            if lease is not None:
                with self._lock:
                    claimed = self._status.leases_claimed + 1
                self._set(worker_id=lease.worker_id, leases_claimed=claimed)
                log(self.log, logging.INFO, "lease_claimed", claims=lease.claims, checkpoint=dict(lease.checkpoint),
                    **self._ids())
                return lease
            states = [self.leases.read(s) for s in slots]
            if all(st is not None and st.drained for st in states):
                return None
            self._stop.wait(self.config.heartbeat_s)
        return None

    # ------------------------------------------------------------------ serving one slot
    def _serve_lease(self, spec: Spec, index: SpecIndex, lease: Lease) -> str:
        lost = threading.Event()
        hb_stop = threading.Event()
        hb = threading.Thread(target=self._heartbeat_loop, args=(hb_stop, lost), name="geo-heartbeat", daemon=True)
        hb.start()
        try:
            return self._serve(spec, index, lease, lost)
        except LeaseLost:
            return _Outcome.LOST
        finally:
            hb_stop.set()
            hb.join(timeout=10)

    def _heartbeat_loop(self, hb_stop: threading.Event, lost: threading.Event) -> None:
        while not hb_stop.wait(self.config.heartbeat_s):
            if self._abandon:
                return
            try:
                self.leases.heartbeat()
            except LeaseLost as exc:
                log(self.log, logging.WARNING, "heartbeat_lost", error=str(exc), **self._ids())
                lost.set()
                return
            except Exception as exc:  # transient AWS errors: keep trying until the lease expires
                log(self.log, logging.WARNING, "heartbeat_failed", error=f"{type(exc).__name__}: {exc}", **self._ids())

    def _serve(self, spec: Spec, index: SpecIndex, lease: Lease, lost: threading.Event) -> str:
        cfg = self.config
        wid = lease.worker_id
        worker = spec.worker(wid)
        parts = spec.partitions_of(wid)
        my_pids = frozenset(p.id for p in parts)
        self._set(partition_ids=tuple(p.id for p in parts))
        stream = self._stream_name(spec)

        self._set(state="waiting_stream")
        shards = None
        while shards is None:
            if self._stop.is_set():
                return _Outcome.STOPPED
            self._check_lease(lost)
            try:
                shards = shards_for_hash_key(self.clients.kinesis, stream, worker.hash_key)
            except StreamNotReady as exc:
                log(self.log, logging.INFO, "waiting_for_stream", reason=str(exc), **self._ids())
                self._stop.wait(cfg.poll_interval_s)

        self._set(state="warming")
        transform = self._transform_factory()
        region = sorted({q for p in parts for q in p.quadkeys})
        transform.load_region(region, cfg.buffer_ring)
        places = int(getattr(transform, "loaded", 0))
        if self._calibration is None:
            self._calibration = calibrate()
        tracker = CostTracker(self._calibration, cfg.grid_zoom, cfg.cost_report_interval_s)
        consumer = ShardConsumer(self.clients.kinesis, stream, shards, lease.checkpoint)
        self._check_lease(lost)
        self.leases.mark_ready()
        self._set(state="ready", ready=True, places_loaded=places)
        log(self.log, logging.INFO, "worker_ready", shards=[s.shard_id for s in shards], region=region[:20],
            region_size=len(region), places_loaded=places,
            calibration_s=self._calibration.seconds_per_unit, **self._ids())

        draining_since: float | None = None
        last_record = time.monotonic()
        next_active_check = 0.0
        while True:
            if self._stop.is_set():
                if not self._abandon:
                    self._report_costs(tracker, spec, wid, force=True)
                return _Outcome.STOPPED
            self._check_lease(lost)
            batch = consumer.poll()
            if batch.records:
                self._process(batch, spec, index, wid, my_pids, transform, tracker, stream)
                last_record = time.monotonic()
            self._report_costs(tracker, spec, wid, force=False)
            now = time.monotonic()
            if draining_since is None and now >= next_active_check:
                next_active_check = now + cfg.active_poll_s
                active = read_active_version(self.clients.dynamodb, cfg.control_table)
                if active is not None and active > cfg.spec_version:
                    draining_since = now
                    self._set(state="draining", draining=True)
                    log(self.log, logging.INFO, "draining", active_version=active, **self._ids())
            if draining_since is not None and self._drained(batch, now, max(draining_since, last_record)):
                self._report_costs(tracker, spec, wid, force=True)
                self.leases.mark_drained()
                self.leases.release()
                log(self.log, logging.INFO, "drained", **self._ids())
                return _Outcome.DRAINED
            if not batch.records:
                self._stop.wait(cfg.poll_interval_s)

    def _drained(self, batch: Batch, now: float, quiet_since: float) -> bool:
        if batch.at_end:
            return True
        return not batch.records and batch.millis_behind_latest == 0 and now - quiet_since >= self.config.drain_quiet_s

    def _check_lease(self, lost: threading.Event) -> None:
        if lost.is_set() or not self.leases.valid():
            self.leases.forget()
            raise LeaseLost(f"lease of {self.owner!r} lost or expired")

    # ------------------------------------------------------------------ processing
    def _process(self, batch: Batch, spec: Spec, index: SpecIndex, wid: str, my_pids: frozenset[str],
                 transform: GeoTransform, tracker: CostTracker, stream: str) -> None:
        cfg = self.config
        events: list[Event] = []
        bad: list[BadRecord] = []
        for rec in batch.records:
            decoded = decode_event(rec.data, f"{stream}/{rec.shard_id}/{rec.sequence_number}")
            (bad if isinstance(decoded, BadRecord) else events).append(decoded)  # type: ignore[arg-type]
        rows: list[dict[str, Any]] = []
        strays: list[str] = []
        if events:
            lon = np.array([e.lon for e in events])
            lat = np.array([e.lat for e in events])
            owners = index.locate(lon, lat, [e.entity_id for e in events])
            gx, gy = tiles_xy(lon, lat, cfg.grid_zoom)
            grid_qks = arrays_to_quadkeys(gx, gy, cfg.grid_zoom)
            for ev, owner_i, qk in zip(events, owners, grid_qks, strict=True):
                pid = spec.partitions[int(owner_i)].id
                stray = pid not in my_pids
                if stray:
                    strays.append(ev.event_id)
                try:
                    fields = tracker.measure(qk, lambda ev=ev: transform.apply(ev.fields))  # type: ignore[misc]
                except Exception as exc:
                    bad.append(BadRecord(f"transform_error: {type(exc).__name__}: {exc} for event {ev.event_id!r}",
                                         json_text(ev.fields), f"{stream}/{batch.shard_id}/event:{ev.event_id}"))
                    continue
                rows.append(enriched_record(ev, fields, spec_version=cfg.spec_version, partition_id=pid,
                                            worker_id=wid, stray=stray))
        ms = self._unique_ms()
        if rows:
            put_jsonl(self.clients.s3, cfg.output_bucket, enriched_key(cfg.spec_version, wid, ms), rows)
        if bad:
            put_jsonl(self.clients.s3, cfg.quarantine_bucket, quarantine_key(cfg.spec_version, wid, ms),
                      [b.to_dict() for b in bad])
            for b in bad[:5]:
                log(self.log, logging.WARNING, "record_quarantined", reason=b.reason, source=b.source, **self._ids())
        if strays:
            log(self.log, logging.WARNING, "stray_events", count=len(strays), sample=strays[:5], **self._ids())
        last = batch.last_sequence
        if last is not None:
            self.leases.checkpoint(batch.shard_id, last)
        with self._lock:
            st = self._status
            self._status = _replace(st, records_read=st.records_read + len(batch.records),
                                    events_out=st.events_out + len(rows), strays=st.strays + len(strays),
                                    quarantined=st.quarantined + len(bad), batches=st.batches + 1)

    def _report_costs(self, tracker: CostTracker, spec: Spec, wid: str, force: bool) -> None:
        if not (tracker.due() or force):
            return
        report = tracker.take()
        if report.total_events == 0:
            return
        epoch_s = max(int(report.ended_at), self._last_cost_s + 1)
        self._last_cost_s = epoch_s
        body = report.to_dict(spec.version, wid, [p.id for p in spec.partitions_of(wid)])
        put_json(self.clients.s3, self.config.costs_bucket, cost_key(spec.version, wid, epoch_s), body)
        with self._lock:
            self._status = _replace(self._status, cost_reports=self._status.cost_reports + 1)
        log(self.log, logging.INFO, "cost_reported", events=report.total_events, quadkeys=len(report.events),
            interval_s=round(report.interval_s, 3), **self._ids())

    # ------------------------------------------------------------------ helpers
    def _unique_ms(self) -> int:
        ms = max(int(time.time() * 1000), self._last_ms + 1)
        self._last_ms = ms
        return ms

    def _stream_name(self, spec: Spec) -> str:
        return spec.stream_name or f"{self.config.prefix}-geo-v{spec.version}"

    def _safe_release(self) -> None:
        try:
            if self.leases.release():
                log(self.log, logging.INFO, "lease_released", **self._ids())
        except Exception as exc:
            log(self.log, logging.WARNING, "release_failed", error=f"{type(exc).__name__}: {exc}", **self._ids())

    def _ids(self) -> dict[str, Any]:
        st = self.status()
        return {"version": self.config.spec_version, "worker_id": st.worker_id, "owner": self.owner}

    def _set(self, **changes: Any) -> None:
        with self._lock:
            self._status = _replace(self._status, **changes)


def _replace(status: WorkerStatus, **changes: Any) -> WorkerStatus:
    return dataclasses.replace(status, **changes)


def json_text(value: Any) -> str:
    """JSON text of an event (for quarantine records)."""
    return json.dumps(value, default=str)
