"""Which slot a worker claims next, and the slot it serves (``docs/CONTRACTS.md``, "Cheap swaps").

:class:`SlotFinder` looks for work in priority order and claims the first free lease:

1. the slots of the version a **started plan** deploys (the fleet just started tasks for its new slots),
   except a slot the plan keeps while its old lease ``v<from>#w`` is not drained (or not claimed yet): the
   process holding that lease carries the slot over itself (and if that process died, rule 2 hands
   ``v<from>#w`` to a new holder, which then carries it: before the flip as it serves, after the flip as it
   drains, :meth:`geo_service.serving.carry.Carrier.follow_after_flip`); once ``v<from>#w`` is drained, whoever is free
   may take the new slot (its carrier died after the flip);
2. the **active** version's slots that are not drained (a slot whose holder died is taken over; a slot
   the plan removes still has to be drained by someone), and, after the flip of a started plan, the old
   version's (the new version reads only once every old slot drained, so a dead drainer's slot is taken
   over and drained);
3. in ``whole`` mode only the slots of ``SPEC_VERSION``; in ``carry`` mode ``SPEC_VERSION`` (the version a
   process was started for) too, unless the plan rolled it back or a newer version superseded it.

``WORKER_ID`` restricts every rule to one slot id (in ``whole`` mode ``SPEC_VERSION`` must have it). The leases are claimed with conditional writes
(:meth:`~geo_service.leases.lease.LeaseManager.claim`), so the rules only decide who *tries*; two owners of a
lease are impossible either way.

**Cost of a search.** The version a started swap deploys comes first: a task the fleet started for one of its
new slots finds it in the first page it reads. Within a version the slots are read in pages of 100 (``BatchGetItem``,
eventually consistent: a stale page only costs a failed conditional claim or a later pass) in a random
order, and the search stops at the first successful claim. So a new worker reads about one page, not every
lease of every version: a thousand workers starting together read O(workers) items in all, not O(workers^2).
A worker that found nothing waits longer before the next pass (:meth:`SlotFinder.next_pass_s`), except that
a lease seen with the same ``expires_at`` on two passes (its holder stopped heartbeating: a dead process) wakes
it just after that expiry, so a dead holder's slot is taken over within about one lease duration of the kill.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from geo_service.adapters.aws import Clients, load_spec_from_s3
from geo_service.entity.handoff import EntityGate
from geo_service.entity.store import EntityStates, store_for
from geo_service.leases.lease import Clock, LeaseManager, read_leases
from geo_service.pipeline.buffer import OutputBuffer
from geo_service.pipeline.consumer import KinesisRecord, ShardConsumer, ShardInfo
from geo_service.pipeline.cost import CostTracker
from geo_service.pipeline.transform import GeoTransform, stateful_of
from geo_service.runtime.config import WorkerConfig
from geo_service.swap.control import ControlView
from geo_service.swap.handover import GateReading, Place, SlotReader
from geo_service.swap.handover_summary import Aggregator, SummaryStore
from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from geokernel.contracts.handoff import event_bytes
from geokernel.contracts.plan import SwapMode
from geokernel.contracts.slot import SlotId
from geokernel.events import ValidEvent, parse_event
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Spec

STALE_MARGIN_S = 0.2  # wake this long after a stale lease's expiry (clock skew between hosts and DynamoDB lag)
SEEN_LIMIT = 10_000  # lease expiries a worker remembers between passes (oldest forgotten first)
SPEC_CACHE = 3  # parsed specs a worker keeps: the versions of a swap (from, to) and the one after it


class SpecCache:
    """Specs by version (immutable objects), at most :data:`SPEC_CACHE` of the newest (a 1M-quadkey spec of ~1,100
    workers is ~84 MB parsed; the worker has 1 GiB by default)."""

    def __init__(self, clients: Clients, bucket: str) -> None:
        self._clients = clients
        self._bucket = bucket
        self._specs: dict[int, Spec] = {}
        self._lock = threading.Lock()

    def get(self, version: int) -> Spec:
        with self._lock:
            if version in self._specs:
                return self._specs[version]
        spec = load_spec_from_s3(self._clients.s3, self._bucket, version)
        with self._lock:
            while len(self._specs) >= SPEC_CACHE:  # the oldest goes; a version still in use is read again
                self._specs.pop(min(self._specs))
            self._specs[version] = spec
        return spec


@dataclass
class Slot:
    """One claimed slot of one version, ready to be served: lease, spec, shard reader and warm transform."""

    leases: LeaseManager
    spec: Spec
    worker_id: str
    stream: str
    shards: list[ShardInfo]  # every shard it reads, for logs (one lineage per owned shard: see ``consumers``)
    consumers: tuple[ShardConsumer, ...]  # one per shard the worker owns (``Worker.shard_keys``)
    transform: GeoTransform
    region: tuple[str, ...]
    places_loaded: int
    places_gained: int
    carried: bool = False
    index: SpecIndex = field(init=False)
    partition_ids: frozenset[str] = field(init=False)
    #: Set when serving starts: the shard readers behind the handover gate (:mod:`geo_service.swap.handover`).
    reader: SlotReader | None = None
    #: The cost tracker serving it (kept when a carried slot starts before its old one drained).
    tracker: CostTracker | None = None
    #: True once its first record was processed (the lease's ``serving_at``).
    serving: bool = False
    timeout_logged: bool = False
    #: True while a swap from this version waits on it: it publishes its caught-up time and flushes sooner.
    publishing: bool = False
    #: Processed output not yet written (:mod:`geo_service.serving.batches`).
    output: OutputBuffer = field(default_factory=OutputBuffer)
    #: Set on the new version's first slot during a swap: it writes the handover summary
    #: (:mod:`geo_service.swap.handover_summary`).
    aggregator: Aggregator | None = None
    #: The entity states of a stateful transform (:mod:`geo_service.entity.store`); None for a stateless one.
    states: EntityStates | None = field(init=False)
    #: The state handoff gate over ``states`` (:mod:`geo_service.entity.handoff`); None for a stateless transform.
    gate: EntityGate | None = field(init=False)
    #: When the gate may next fetch the states its held entities wait for (monotonic seconds).
    next_fetch: float = 0.0
    #: A stateful slot's checkpoints not yet moved, and when it last wrote its states (:mod:`geo_service.serving.batches`).
    pending_checkpoints: dict[str, str] = field(default_factory=dict)
    states_saved_at: float = float("-inf")

    def __post_init__(self) -> None:
        self.index = SpecIndex(self.spec)
        self.partition_ids = frozenset(p.id for p in self.spec.partitions_of(self.worker_id))
        self.states = store_for(self.transform) if stateful_of(self.transform) is not None else None
        self.gate = None
        if self.states is not None:
            self.share_states(self.states)

    def share_states(self, store: EntityStates) -> None:
        """Serve ``store`` (a carried slot shares its old slot's), behind a gate of this slot's own."""
        self.states = store
        label = str(SlotId(self.version, self.worker_id))
        store.labels.add(label)
        self.gate = EntityGate(store, label=label)

    @property
    def version(self) -> int:
        return self.spec.version

    @property
    def caught_up_at(self) -> float:
        """Every record that arrived in its shards before this time is processed (0 before it served)."""
        return self.reader.caught_up_at if self.reader is not None else 0.0


def region_of(spec: Spec, worker_id: str) -> tuple[str, ...]:
    """The quadkeys a slot owns (the transform loads them plus a buffer ring)."""
    return tuple(sorted({q for p in spec.partitions_of(worker_id) for q in p.quadkeys}))


@dataclass(frozen=True)
class Search:
    """The outcome of one pass: the claimed lease (or None) and how many slots still need a holder."""

    claimed: LeaseManager | None
    open_slots: int


#: Leases read per BatchGetItem call (the API's limit is 100 keys).
PAGE = 100


class SlotFinder:
    """Claims the next slot by the rules of the module docstring."""

    def __init__(self, config: WorkerConfig, clients: Clients, owner: str, specs: SpecCache,
                 clock: Clock = time.time, manager: Callable[[int], LeaseManager] | None = None) -> None:
        self.config = config
        self.clients = clients
        self.owner = owner
        self.specs = specs
        self.clock = clock
        self._manager = manager or (lambda v: LeaseManager(clients.dynamodb, config.leases_table, v, owner,
                                                           config.lease_s, clock=clock))
        self._rng = random.Random(owner)
        self._misses = 0
        self._seen: dict[tuple[int, str], float] = {}  # (version, slot) -> expires_at seen on the last pass
        self._wake_at: float | None = None  # just after a stale lease's expiry

    def versions(self, ctl: ControlView) -> list[int]:
        """The versions whose slots this worker may claim, in priority order."""
        cfg = self.config
        if cfg.swap_mode is SwapMode.WHOLE:
            return [cfg.spec_version] if cfg.spec_version is not None else []
        out: list[int] = []
        plan = ctl.plan
        if plan is not None and plan.started and plan.to_version > (ctl.active or 0):
            out.append(plan.to_version)  # the slots the fleet just started tasks for
        if ctl.active is not None and ctl.active not in out:
            out.append(ctl.active)
        if plan is not None and plan.started and plan.from_version is not None and plan.from_version not in out:
            out.append(plan.from_version)  # flipped, still draining: a slot whose drainer died must still drain
        v = cfg.spec_version
        if v is not None and v not in out and not self._passed_over(v, ctl):
            out.append(v)
        return out

    @staticmethod
    def _passed_over(version: int, ctl: ControlView) -> bool:
        plan = ctl.plan
        if plan is None:
            return False
        superseded = ctl.active is not None and version > ctl.active and plan.to_version > version
        return ctl.dropped(version) or superseded

    def next_pass_s(self) -> float:
        """How long to wait before the next search.

        A heartbeat period, doubling after each pass that claimed nothing up to ``lease_s`` (an idle worker reads
        every lease at most about once a lease). When the last pass saw a lease whose ``expires_at`` had not moved
        since the pass before (its holder stopped heartbeating), the wait ends :data:`STALE_MARGIN_S` after that
        expiry instead, so a dead holder's slot is taken over within about one lease duration of its last
        heartbeat rather than up to two. A live holder renews every ``lease_s / 3``, so it costs at most one
        extra read per pass.
        """
        backoff = float(min(self.config.heartbeat_s * (2 ** min(self._misses, 6)), self.config.lease_s))
        if self._wake_at is None:
            return backoff
        return max(0.0, min(backoff, self._wake_at - self.clock()))

    def search(self, ctl: ControlView) -> Search:
        """One pass over the candidate slots, a page of leases at a time; claims the first free one."""
        open_slots = 0
        now = self.clock()
        self._wake_at = None
        for version in self.versions(ctl):
            spec = self.specs.get(version)
            ids = [w.id for w in spec.workers]
            pin = self.config.worker_id
            if pin is not None:
                if self.config.swap_mode is SwapMode.WHOLE:
                    spec.worker(pin)  # SpecError naming the slot when the version lacks it
                elif pin not in ids:
                    continue  # the pinned slot is not (or no longer) in this version
                ids = [pin]
            else:
                self._rng.shuffle(ids)  # free slots are often contiguous (a grow appends them): spread the pages
            for i in range(0, len(ids), PAGE):
                page = ids[i:i + PAGE]
                states = read_leases(self.clients.dynamodb, self.config.leases_table, version, page, consistent=False)
                waiting = self._carried_elsewhere(version, page, ctl)
                for wid in page:
                    st = states.get(wid)
                    if st is not None and st.drained:
                        continue
                    open_slots += 1
                    if st is not None and st.held_by_other(self.owner, now):
                        self._note_held(version, wid, st.expires_at)
                        continue
                    if wid in waiting:
                        continue
                    manager = self._manager(version)
                    if manager.claim(wid) is not None:
                        self._misses = 0
                        return Search(manager, open_slots)
        self._misses += 1
        return Search(None, open_slots)

    def _note_held(self, version: int, wid: str, expires_at: float) -> None:
        """Remember a held lease's expiry; one not renewed since the last pass sets the next wake-up."""
        key = (version, wid)
        if self._seen.get(key) == expires_at:
            wake = expires_at + STALE_MARGIN_S
            self._wake_at = wake if self._wake_at is None else min(self._wake_at, wake)
        self._seen[key] = expires_at
        if len(self._seen) > SEEN_LIMIT:
            self._seen.pop(next(iter(self._seen)))

    def _carried_elsewhere(self, version: int, page: Sequence[str], ctl: ControlView) -> set[str]:
        """Kept slots of ``version`` whose old lease is not drained (or not even claimed) yet: their carrier claims
        them (rule 1)."""
        plan = ctl.plan
        if (plan is None or not plan.started or plan.to_version != version or plan.from_version is None
                or plan.mode != SwapMode.CARRY):
            return set()
        old_ids = {w.id for w in self.specs.get(plan.from_version).workers}
        kept = [w for w in page if w in old_ids]
        if not kept:
            return set()
        old = read_leases(self.clients.dynamodb, self.config.leases_table, plan.from_version, kept, consistent=False)
        return {w for w in kept if not (w in old and old[w].drained)}


def handover_reading(store: SummaryStore, own_old: Callable[[], tuple[str | None, float]],
                     aggregator: Aggregator | None = None) -> Callable[[], GateReading]:
    """The gate's reading of the old version: the aggregator's own newest summary, else the stored one.

    ``own_old()`` is the old slot this process carries and its caught-up time now (``(None, 0)`` when it carries
    none): :meth:`~geo_service.swap.handover_summary.HandoverSummary.low_for` uses it in place of its published time.
    """

    def read() -> GateReading:
        summary = aggregator.latest if aggregator is not None and aggregator.latest is not None else store.read()
        if summary is None:
            return GateReading(low=0.0)  # nothing aggregated yet: nothing passes
        slot, caught_up = own_old()
        return GateReading(low=summary.low_for(slot, caught_up), drained=summary.drained)

    return read


def old_places(spec: Spec,
               fields: EventFields = DEFAULT_EVENT_FIELDS) -> Callable[[tuple[KinesisRecord, ...]], list[Place]]:
    """For the handover gate: each record's entity and the slot of ``spec`` (the old version) owning its place.

    A record that is not a valid event has no place (``old_owner`` None): it only waits for the caught-up rule
    and is quarantined when processed.
    """
    index = SpecIndex(spec)

    def classify(records: tuple[KinesisRecord, ...]) -> list[Place]:
        out = [Place("", None)] * len(records)
        valid = [(i, ev) for i, r in enumerate(records) if isinstance(ev := parse_event(event_bytes(r.data), fields), ValidEvent)]
        if not valid:
            return out
        owners = index.locate([ev.lon for _i, ev in valid], [ev.lat for _i, ev in valid],
                              [ev.entity_id for _i, ev in valid])
        for (i, ev), k in zip(valid, owners.tolist(), strict=True):
            out[i] = Place(ev.entity_id, spec.partitions[k].worker)
        return out

    return classify
