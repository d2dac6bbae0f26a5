"""The scale simulation's actors: the ECS service scheduler, the deployer Lambda, the router Lambdas.

Each runs as a thread on the simulated clock (:mod:`local.scale.simtime`) and calls the project's own code:

* :class:`EcsScheduler` plays ECS itself (not project code): it reads the worker service's desired count from
  moto's ECS and starts light in-process workers (:class:`geo_service.worker.GeoWorker` on the simulated clock,
  with a transform that does nothing, a fixed calibration, and the scale-in protection calls counted instead of
  sent to an agent) after a launch delay, or stops idle ones when the count falls. The deploy controller's
  ``UpdateService`` and ``DescribeServices`` calls are the project's and are counted.
* :class:`Deployer` is the deployer Lambda: a newly published version is requested and stepped at once (the S3
  event), and while a deployment is in flight it steps every ``step_s`` (``HOOK_CALLBACK_DELAY_S``, 15 s),
  otherwise every minute (the schedule). It runs :class:`lambdas.deploy.controller.DeployController` over
  :class:`lambdas.deploy.fleet.EcsFleet`.
* :class:`Router` is the router Lambda's concurrent containers, one per ingest shard (the event source mapping
  polls each shard and invokes with up to ``router_batch_size`` = 500 records). Each container keeps its own
  :class:`lambdas.router.routing.ActiveSpecCache` (a control-table read per invocation, as deployed, and an
  S3 GET per new version). One invocation in ``sample`` is routed by :func:`lambdas.router.routing.route_batch`
  and put into moto for real (the workers read and process those events); every other invocation goes through
  the same routing (:meth:`RoutingTable.hash_keys_for`, :func:`lambdas.runtime.kinesis.chunk_entries`) and its
  ``PutRecords`` call is counted by the same rules without being sent (moto takes ~0.1 ms per record: 100,000
  events per simulated second could not be sent).

  With state handoff (``--stateful``) every container also has its ingest shard's ledger
  (:class:`lambdas.router.ledger.LedgerStore` over the counted S3 client): a sent invocation routes one shard's
  entities through it (a conditional GET, the stamped puts and markers, a conditional PUT), and a counted one
  counts the same two S3 calls on its ledger's key and its puts in the same rounds of one event per entity
  (:func:`put_rounds`). The workers then run :class:`CountingState`, a stateful transform, so their state
  snapshots and handoffs are the real worker's calls.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from geo_service.adapters.aws import Clients as WorkerClients
from geo_service.pipeline.cost import Calibration
from geo_service.pipeline.transform import Applied, GeoTransform
from geo_service.runtime.config import WorkerConfig
from geo_service.runtime.lifecycle import WorkerState
from geo_service.runtime.protection import ScaleInProtection
from geo_service.worker import GeoWorker
from geokernel.aws_budget.calls import CallLog
from geokernel.contracts.control import ControlKey, DeployStatus
from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS
from geokernel.contracts.handoff import router_ledger_key
from geokernel.contracts.spec_pointer import DesiredPointer, spec_key
from geokernel.partition_spec.model import Spec
from lambdas.deploy.controller import DeployController
from lambdas.router.ledger import LedgerStore
from lambdas.router.routing import ActiveSpecCache, InputRecord, RoutingTable, route_batch
from lambdas.runtime.dynamodb import ControlTable
from lambdas.runtime.kinesis import GeoStreams, PutEntry, chunk_entries
from lambdas.runtime.s3 import QuarantineSink, SpecStore
from local.scale.simtime import SimTime
from local.scale.world import EventSource, HomedSource

log = logging.getLogger(__name__)

#: Calibration the light workers use instead of measuring one (a real task calibrates once at start-up).
CALIBRATION = Calibration(seconds_per_unit=0.004)
#: An idle generic worker (no lease) is what ECS may stop on a scale-in: every other task is protected.
IDLE = (WorkerState.IDLE, WorkerState.CLAIMING, WorkerState.STARTING)


class NullTransform:
    """The light workers' transform: no reference data, nothing added to the event."""

    def __init__(self) -> None:
        self.loaded = 0

    def load_region(self, quadkeys: Sequence[str], buffer_ring: int) -> None:
        self.loaded = len(quadkeys)

    def apply(self, event: Mapping[str, Any]) -> dict[str, Any]:
        return {}


class CountingState(NullTransform):
    """The light workers' stateful transform (``--stateful``): each entity's state is its number of events."""

    stateful = True

    def apply_stateful(self, event: Mapping[str, Any], state: Any) -> Applied:
        seen = (state.get("seen", 0) if isinstance(state, dict) else 0) + 1
        return Applied({"seen": seen}, {"seen": seen})


#: The ingest stream the simulated router's containers read (one shard each; only its ledgers' keys use it).
INGEST_STREAM = "georebal-sim-ingest"


def ingest_shard_id(container: int) -> str:
    """The ingest shard of router container ``container``, named as Kinesis names shards."""
    return f"shardId-{container:012d}"


@dataclass
class Launch:
    """One task of the worker service: launched at ``at``, its worker once running."""

    at: float
    worker: GeoWorker | None = None


class EcsScheduler:
    """ECS's service scheduler for the worker service (see the module docstring)."""

    def __init__(self, sim: SimTime, ecs: Any, cluster: str, service: str, *, config: WorkerConfig,
                 clients: WorkerClients, launch_delay_s: float, on_protect: Callable[[dict[str, object]], object],
                 on_launch: Callable[[float], None], period_s: float = 1.0,
                 transform_factory: Callable[[], GeoTransform] = NullTransform) -> None:
        self.sim = sim
        self.transform_factory = transform_factory
        self._ecs = ecs
        self.cluster = cluster
        self.service = service
        self.config = config
        self.clients = clients
        self.launch_delay_s = launch_delay_s
        self.on_protect = on_protect
        self.on_launch = on_launch
        self.period_s = period_s
        self.tasks: list[Launch] = []
        self.started = 0
        self.stopped = 0
        self._stop = sim.event()

    def desired(self) -> int:
        svc = self._ecs.describe_services(cluster=self.cluster, services=[self.service])["services"][0]
        return int(svc["desiredCount"])

    def run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.reconcile()

    def stop(self) -> None:
        self._stop.set()

    def reconcile(self) -> None:
        now = self.sim.time()
        for task in self.tasks:
            if task.worker is None and task.at <= now:
                task.worker = self._start_worker()
        self.tasks = [t for t in self.tasks if t.worker is None or t.worker.status().state not in
                      (WorkerState.RELEASED, WorkerState.RETIRED, WorkerState.FAILED, WorkerState.ABANDONED)]
        surplus = len(self.tasks) - self.desired()
        if surplus > 0:
            pending = [t for t in self.tasks if t.worker is None]
            for t in pending[:surplus]:
                self.tasks.remove(t)
            surplus -= min(surplus, len(pending))
            idle = [t for t in self.tasks if t.worker is not None and t.worker.status().state in IDLE]
            for t in idle[:surplus]:
                assert t.worker is not None
                t.worker.request_stop()
                self.stopped += 1
        else:
            self.tasks += [Launch(now + self.launch_delay_s) for _ in range(-surplus)]
            for _ in range(-surplus):
                self.on_launch(now)  # Fargate takes a launch token when the task is placed, not when it runs

    def _start_worker(self) -> GeoWorker:
        self.started += 1
        protection = ScaleInProtection("sim://ecs-agent", clock=self.sim.monotonic, send=self.on_protect)
        worker = GeoWorker(self.config, self.clients, owner=f"task-{self.started:05d}", timebase=self.sim,
                           transform_factory=self.transform_factory, calibration=CALIBRATION, protection=protection)
        return worker.start()

    @property
    def workers(self) -> list[GeoWorker]:
        return [t.worker for t in self.tasks if t.worker is not None]


class Deployer:
    """The deployer Lambda on the simulated clock (see the module docstring)."""

    def __init__(self, sim: SimTime, controller: DeployController, specs: SpecStore, control: ControlTable, *,
                 step_s: float = 15.0, schedule_s: float = 60.0) -> None:
        self.sim = sim
        self.controller = controller
        self.specs = specs
        self.control = control
        self.step_s = step_s
        self.schedule_s = schedule_s
        self.published: list[int] = []
        self.states: list[tuple[float, str, int | None]] = []
        self._wake = sim.event()
        self._stop = sim.event()

    def publish(self, spec: Spec) -> None:
        """What the partitioner Lambda does: the spec object, then the desired pointer; S3 then invokes us."""
        self.specs.put_new(spec)
        desired = DesiredPointer(spec.version, spec_key(spec.version), published_at=f"{self.sim.time():.3f}")
        self.control.put_forward(ControlKey.DESIRED, desired.to_item())
        self.published.append(spec.version)
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def run(self) -> None:
        while not self._stop.is_set():
            for v in self.published:
                self.controller.request(v)
            self.published.clear()
            st = self.controller.step()
            if not self.states or self.states[-1][1:] != (st.status, st.version):
                self.states.append((self.sim.time(), st.status, st.version))
                log.info("deploy v%s: %s (%s)", st.version, st.status, st.reason)
            self._wake = self.sim.event()
            self._wake.wait(self.step_s if st.in_flight else self.schedule_s)

    def done(self, version: int) -> bool:
        st = self.controller.state()
        return st.version == version and st.status in (DeployStatus.DONE, DeployStatus.ROLLED_BACK)


@dataclass
class RouterStats:
    """What the router did: events routed (sent and counted), invocations, and what failed."""

    routed: int = 0
    sent: int = 0
    failed: int = 0
    invocations: int = 0
    sent_ids: list[str] = field(default_factory=list)


class _SharedParse(SpecStore):
    """A container's spec store: its own S3 GET per version, but the parse shared by every container of the
    simulation (a real container parses its own copy; sharing only saves this machine's memory)."""

    def __init__(self, s3: Any, bucket: str, parsed: dict[str, Spec]) -> None:
        super().__init__(s3, bucket)
        self.parsed = parsed

    def get(self, key: str) -> Spec:
        self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        if key not in self.parsed:
            self.parsed[key] = super().get(key)
        return self.parsed[key]


class Router:
    """The router Lambda's containers (see the module docstring)."""

    def __init__(self, sim: SimTime, *, control: ControlTable, s3: Any, specs_bucket: str, streams: GeoStreams,
                 quarantine: QuarantineSink, events: Callable[[], EventSource | HomedSource], events_per_s: float,
                 containers: int, sample: int, count_put: Callable[[str, list[PutEntry], float], None],
                 tick_s: float = 0.5, payload_bytes: int = 110, ledgers: LedgerStore | None = None,
                 calls: CallLog | None = None) -> None:
        self.sim = sim
        self.ledgers = ledgers
        self.calls = calls
        self._seq = [0] * containers  # each ingest shard's last sequence number (the ledger orders by it)
        self.streams = streams
        self.quarantine = quarantine
        self.events = events
        self.events_per_s = events_per_s
        self.sample = sample
        self.count_put = count_put
        self.tick_s = tick_s
        self.payload = b" " * payload_bytes
        parsed: dict[str, Spec] = {}
        self.caches = [ActiveSpecCache(control, _SharedParse(s3, specs_bucket, parsed),
                                       clock=sim.monotonic) for _ in range(containers)]
        self.stats = RouterStats()
        self._stop = sim.event()
        self._turn = 0

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        while not self._stop.wait(self.tick_s):
            self.tick()

    def tick(self) -> None:
        per = round(self.events_per_s * self.tick_s / len(self.caches))
        for i, cache in enumerate(self.caches):
            table = cache.current()
            if table is None or per == 0:
                continue
            self.stats.invocations += 1
            self._turn += 1
            if self._turn % self.sample == 0 and self.ledgers is not None:
                self._send_stamped(table, per, i)
            elif self._turn % self.sample == 0:
                self._send(table, per)
            else:
                self._count(table, per, None if self.ledgers is None else i)

    def _send(self, table: RoutingTable, n: int) -> None:
        ev = self.events().take(n)
        records = [InputRecord(eid, d, "sim") for eid, d in zip(ev.event_ids, ev.data, strict=True)]
        result = route_batch(records, table, self.streams, self.quarantine)
        self._sent(ev.event_ids, result.routed, result.failed_ids)

    def _send_stamped(self, table: RoutingTable, n: int, container: int) -> None:
        """One invocation of ingest shard ``container``: its entities' events, numbered through its ledger."""
        assert self.ledgers is not None
        source = self.events()
        if not isinstance(source, HomedSource):
            raise TypeError("state handoff needs entities that keep their home cell (HomedSource)")
        ev = source.take(n, part=(container, len(self.caches)))
        first = self._seq[container]
        self._seq[container] += n
        records = [InputRecord(str(first + k + 1), d, "sim") for k, d in enumerate(ev.data)]
        shard = ingest_shard_id(container)
        ledger = self.ledgers.load(INGEST_STREAM, shard)
        result = route_batch(records, table, self.streams, self.quarantine, DEFAULT_EVENT_FIELDS, ledger)
        self.ledgers.save(INGEST_STREAM, shard, ledger)
        by_item = dict(zip((r.item_id for r in records), ev.event_ids, strict=True))
        self._sent(ev.event_ids, result.routed, tuple(by_item[f] for f in result.failed_ids))

    def _sent(self, event_ids: list[str], routed: int, failed_ids: Sequence[str]) -> None:
        self.stats.routed += routed
        self.stats.sent += routed
        self.stats.failed += len(failed_ids)
        failed = set(failed_ids)
        self.stats.sent_ids += [eid for eid in event_ids if eid not in failed]

    def _count_ledger(self, container: int) -> None:
        """The ledger calls of a counted invocation: a conditional GET and a PUT of its shard's ledger."""
        assert self.ledgers is not None and self.calls is not None
        params = {"Bucket": self.ledgers.bucket, "Key": router_ledger_key(INGEST_STREAM, ingest_shard_id(container))}
        for op in ("GetObject", "PutObject"):
            self.calls.record_call("s3", op, params, {}, at=self.sim.time())

    def _count(self, table: RoutingTable, n: int, container: int | None) -> None:
        """A counted invocation: its PutRecords calls counted, not sent. With state handoff (``container`` set) it
        draws that ingest shard's entities, puts in rounds of at most one event per entity (as
        :func:`lambdas.router.stateful.route_stamped` does) and counts its ledger's GET and PUT."""
        source = self.events()
        ev = (source.take(n, encode=False, part=(container, len(self.caches)))
              if container is not None and isinstance(source, HomedSource) else source.take(n, encode=False))
        keys = table.hash_keys_for(ev.lon, ev.lat, ev.entity_ids)
        entries = [PutEntry(self.payload, e, k) for e, k in zip(ev.entity_ids, keys, strict=True)]
        for wave in ([entries] if container is None else put_rounds(entries)):
            for chunk in chunk_entries(wave):
                self.count_put(table.stream_name, [wave[i] for i in chunk], self.sim.time())
        if container is not None:
            self._count_ledger(container)
        self.stats.routed += n


def put_rounds(entries: Sequence[PutEntry]) -> list[list[PutEntry]]:
    """``entries`` in rounds of at most one per entity (partition key), each entity's in order."""
    rounds: list[list[PutEntry]] = []
    seen: dict[str, int] = {}
    for e in entries:
        k = seen.get(e.partition_key, 0)
        seen[e.partition_key] = k + 1
        if k == len(rounds):
            rounds.append([])
        rounds[k].append(e)
    return rounds


def router_containers(events_per_s: float) -> int:
    """Concurrent router containers: one per ingest shard of an on-demand stream carrying ``events_per_s``
    (a shard takes 1,000 records/s of writes; the event source mapping invokes one container per shard)."""
    return max(1, math.ceil(events_per_s / 1000.0))
