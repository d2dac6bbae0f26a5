"""Per-snapshot partitioner logic, callable in-process (the Lambda handler and the local loop use it).

:func:`process_snapshot` takes one manifest key and does, in order:

1. **Idempotence / staleness**: control ``pk="snapshot"`` records the last processed manifest key,
   checksum and window end. The same key and checksum again is a ``duplicate`` (no-op); a window
   ending at or before the last processed one is ``rejected`` as ``stale_snapshot``.
2. **Complete windows only**: a window the Spark job saw only part of (``complete: false``, e.g. its run started
   mid-window on a fresh checkpoint) is ``rejected`` as ``partial_window``: its counts are a lower bound of the
   load and would undersize the spec. Like every rejection it leaves the ``pk="snapshot"`` mark as it was.
3. **Verify** the manifest and every data file (:mod:`lambdas.partitioner.snapshot`); an empty
   snapshot is rejected.
4. **Read rows** with :func:`partitioner.load.read.read_snapshot_rows`. When the snapshot carries no
   cost column, the latest worker cost reports of the *active* version are merged in: the weight of
   a row is ``events * rate(grid-zoom ancestor)``; cells without a reported rate get the
   events-weighted mean rate of those with one (so totals stay comparable with ``MAX_LOAD``).
5. **Control step** (:func:`partitioner.control.controller.control_step`, the code the simulator runs): the
   controller state (load history per region, smoothed levels per cell, last publish) is loaded from S3
   (:mod:`lambdas.partitioner.state`), the snapshot absorbed into it, and the configured policy
   (``POLICY_JSON``: predictive by default, or reactive) decides, building a candidate with
   :func:`partitioner.builders.build_spec` when it needs one (previous = the desired spec for stickiness,
   ``version = desired + 1``, ``stream_name = <prefix>-geo-v<n>``). The forecast horizon is the median
   snapshot-to-live latency the deploy controller recorded (control ``pk="latency"``), else
   ``POLICY_JSON``'s ``latency_s``, else one window. A spec to publish gets ``source.window_end`` (the
   snapshot's window end) and is validated. ``pk="policy"`` records ``last_published_at`` (epoch s) and
   ``last_decision`` (``Decision.to_dict()``).
6. **Publish** (only if the policy says so; :mod:`lambdas.partitioner.publish`, the fast path's too): put
   ``specs/v<n:08d>.json`` with ``If-None-Match: *`` (never overwrite), then control ``pk="desired"`` only if it
   still holds the version the spec was built on, then ``pk="policy"``, the controller state, and ``pk="snapshot"``.
   When ``desired`` moved meanwhile (the fast path published a relief) the step is taken again on the new
   ``desired`` (sticky to it), at most :data:`MAX_RACES` times; then the snapshot is ``superseded``.

The surges the fast path relieved (:data:`geokernel.contracts.surge.SURGES_KEY`, the declared crowds' format) are
sized for as declared crowds are, while they last.

A rejected snapshot publishes nothing and leaves every pointer and the controller state as they were.
:func:`replay_step` takes the same step again without writing anything (the local loop keeps the exact input of a
build that was rejected, :mod:`local.rejected`).

Local-loop use::

    deps = PartitionerDeps.from_config(LambdaConfig.from_env(), make_clients(cfg))
    outcome = process_snapshot(deps, "snapshots/window_end=.../_manifest.json")
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from geokernel.contracts.control import ControlKey, PolicyMark, SnapshotMark
from geokernel.contracts.crowds import CROWDS_KEY
from geokernel.contracts.env import EnvVar
from geokernel.contracts.outcome import OutcomeStatus
from geokernel.contracts.spec_pointer import DesiredPointer
from geokernel.contracts.stream import geo_stream_name
from geokernel.contracts.surge import SURGES_KEY
from geokernel.errors import PartitionerError, PolicyError
from geokernel.partition_spec.model import Spec
from geokernel.partition_spec.rules import validate
from geokernel.partition_spec.shards import with_shards
from lambdas.partitioner.publish import PublishFailed, publish
from lambdas.partitioner.snapshot import (
    Manifest,
    SnapshotRejected,
    parse_manifest,
    read_rows,
    require_complete,
    verify_manifest,
)
from lambdas.partitioner.state import ControlStateStore
from lambdas.runtime.clients import Clients
from lambdas.runtime.config import ConfigError, LambdaConfig
from lambdas.runtime.dynamodb import ControlTable
from lambdas.runtime.errors import AdapterError
from lambdas.runtime.records import median_latency_s, read_active, read_desired, read_latency_samples
from lambdas.runtime.s3 import CostReports, ObjectStore, SpecStore, SurgeStore
from lambdas.runtime.timestamps import now_iso
from partitioner.builders import build_spec
from partitioner.control.controller import ControlSettings, ControlState, Step, control_step
from partitioner.control.crowds import DeclaredCrowd, parse_crowds
from partitioner.load.cost import apply_cost_rates
from partitioner.load.counts import Counts
from partitioner.load.read import read_snapshot_rows

Builder = Callable[..., Spec]
MAX_RACES = 3  # steps taken again on a desired version that moved meanwhile, before a snapshot is superseded


@dataclass(frozen=True)
class Outcome:
    """What :func:`process_snapshot` did.

    ``status``: :class:`~geokernel.contracts.outcome.OutcomeStatus` (``held``: the policy said no; ``superseded``: a
    newer version was published concurrently). ``reason`` names the rule or bad value.
    """

    status: OutcomeStatus
    manifest_key: str
    reason: str = ""
    code: str = ""
    version: int | None = None
    spec_key: str | None = None
    workers: int | None = None
    decision_reasons: tuple[str, ...] = ()
    max_utilisation: float | None = None  # the live spec's busiest worker under this snapshot's load


@dataclass(frozen=True)
class PartitionerDeps:
    """Everything the logic talks to; build once per process."""

    control: ControlTable
    snapshots: ObjectStore
    specs: SpecStore
    costs: CostReports | None
    max_load: float
    prefix: str
    policy: ControlSettings
    state: ControlStateStore
    crowds: ObjectStore | None = None  # the specs bucket, where the operator may declare crowds (CROWDS_KEY)
    surges: SurgeStore | None = None  # the specs bucket's surge signals and relieved surges (the fast path)
    build: Builder = build_spec
    shards_per_worker: int = 1  # SHARDS_PER_WORKER: each worker owns this many geo-stream shards
    clock: Callable[[], float] = time.time

    @classmethod
    def from_config(cls, cfg: LambdaConfig, clients: Clients) -> PartitionerDeps:
        cfg.require(EnvVar.CONTROL_TABLE, EnvVar.SNAPSHOTS_BUCKET, EnvVar.SPECS_BUCKET, EnvVar.MAX_LOAD)
        return cls(control=ControlTable(clients.dynamodb, cfg.control_table),
                   snapshots=ObjectStore(clients.s3, cfg.snapshots_bucket),
                   specs=SpecStore(clients.s3, cfg.specs_bucket),
                   costs=CostReports(clients.s3, cfg.costs_bucket) if cfg.costs_bucket else None,
                   max_load=float(cfg.max_load or 0.0), prefix=cfg.prefix, policy=load_policy(cfg.policy_json),
                   state=ControlStateStore(clients.s3, cfg.specs_bucket),
                   crowds=ObjectStore(clients.s3, cfg.specs_bucket), surges=SurgeStore(clients.s3, cfg.specs_bucket),
                   shards_per_worker=cfg.shards_per_worker)


def load_policy(policy_json: str) -> ControlSettings:
    """Return the controller settings of ``POLICY_JSON`` (:class:`partitioner.control.controller.ControlSettings`)."""
    try:
        return ControlSettings.from_json(policy_json, where="environment variable POLICY_JSON")
    except PolicyError as exc:
        raise ConfigError(str(exc)) from None


def process_snapshot(deps: PartitionerDeps, manifest_key: str) -> Outcome:
    """Process one snapshot manifest; see the module docstring. Never raises for bad data.

    Parameters
    ----------
    deps : PartitionerDeps
    manifest_key : str
        Key of ``_manifest.json`` in the snapshots bucket.

    Returns
    -------
    Outcome
    """
    try:
        return _process(deps, manifest_key)
    except SnapshotRejected as exc:
        return Outcome(OutcomeStatus.REJECTED, manifest_key, str(exc), exc.code)


def replay_step(deps: PartitionerDeps, manifest_key: str) -> Step:
    """The control step :func:`process_snapshot` takes for this snapshot, read from the same stores, writing nothing.

    No idempotence or staleness check is made and nothing is published or recorded: the local loop replays a
    snapshot whose build was rejected with a recording builder (``deps.build``) to keep the build's exact input
    (:mod:`local.rejected`). Raises :class:`~lambdas.partitioner.snapshot.SnapshotRejected` as
    :func:`process_snapshot` would reject it.
    """
    inputs = _inputs(deps, _read_manifest(deps, manifest_key))
    return _decide(deps, inputs)


@dataclass(frozen=True)
class _Inputs:
    """What one snapshot's control step reads: the verified snapshot, the live spec and the controller state."""

    manifest: Manifest
    counts: Counts  # the load to balance (cost-weighted when rates are known)
    events: Counts  # the plain event counts the load history follows
    desired: DesiredPointer | None
    previous: Spec | None
    state: ControlState
    notes: tuple[str, ...]  # the state's load note and the cost reports skipped, named in the outcome's reasons
    now: float


def _read_manifest(deps: PartitionerDeps, manifest_key: str) -> Manifest:
    raw = deps.snapshots.read(manifest_key)
    if raw is None:
        raise SnapshotRejected("missing_file", f"manifest s3://{deps.snapshots.bucket}/{manifest_key} does not exist")
    return parse_manifest(raw, f"s3://{deps.snapshots.bucket}/{manifest_key}")


def _process(deps: PartitionerDeps, manifest_key: str) -> Outcome:
    manifest = _read_manifest(deps, manifest_key)
    mark_item = deps.control.get(ControlKey.SNAPSHOT)
    mark = SnapshotMark.from_item(mark_item) if mark_item else None
    if mark and mark.manifest_key == manifest_key and mark.checksum == manifest.record.checksum:
        return Outcome(OutcomeStatus.DUPLICATE, manifest_key, f"already processed at {mark.processed_at} ({mark.outcome})",
                       "duplicate")
    if mark and manifest.record.window_end_iso <= mark.window_end:
        raise SnapshotRejected("stale_snapshot", f"{manifest.key}: window_end {manifest.record.window_end_iso!r} "
                                                 f"is not after the last processed {mark.window_end!r} "
                                                 f"({mark.manifest_key})")
    inputs = _inputs(deps, manifest)
    outcome = Outcome(OutcomeStatus.SUPERSEDED, manifest_key)
    for _ in range(MAX_RACES):
        step = _decide(deps, inputs)
        decision, state, previous = step.decision, inputs.state, inputs.previous
        reasons = (*decision.reasons, *inputs.notes)
        if step.candidate is None:
            deps.control.put(ControlKey.POLICY, PolicyMark(state.last_published_at, decision.to_dict()).to_item())
            deps.state.save(step.state)
            _mark(deps, manifest_key, manifest.record.checksum, manifest.record.window_end_iso, "held")
            return Outcome(OutcomeStatus.HELD, manifest_key, "policy: " + "; ".join(reasons), "held", decision_reasons=reasons,
                           workers=len(previous.workers) if previous else None,
                           max_utilisation=_live_utilisation(step))
        outcome = _publish(deps, manifest_key, manifest, step.candidate, step, reasons, inputs)
        if outcome.code != "raced":
            return outcome
        desired = read_desired(deps.control)  # the fast path published meanwhile: build again on its version
        inputs = replace(inputs, desired=desired, previous=_previous(deps, desired))
    return replace(outcome, status=OutcomeStatus.SUPERSEDED, code="superseded")


def _inputs(deps: PartitionerDeps, manifest: Manifest) -> _Inputs:
    """Verify the snapshot and read its rows, the cost rates, the live spec and the controller state."""
    require_complete(manifest)  # a window a fresh job run saw only part of never builds a spec (glue_jobs)
    verify_manifest(manifest)
    text = read_rows(deps.snapshots, manifest)
    try:
        counts = read_snapshot_rows(text, manifest.key, use_cost=manifest.record.has_cost)
        events = read_snapshot_rows(text, manifest.key, use_cost=False) if manifest.record.has_cost else counts
    except PartitionerError as exc:
        raise SnapshotRejected("bad_rows", str(exc)) from None
    if counts.total <= 0:
        raise SnapshotRejected("empty_snapshot", f"{manifest.key}: total load is {counts.total!r}")
    active = read_active(deps.control)
    skipped: tuple[str, ...] = ()  # cost reports the contract rejected: named in the outcome's reasons
    if not manifest.record.has_cost and deps.costs is not None and active is not None:
        try:
            cost = deps.costs.latest(active.version)
            rates, skipped = cost.rates, tuple(f"cost report skipped: {why}" for why in cost.skipped)
        except AdapterError:
            rates = {}
        counts = apply_cost_rates(counts, dict(rates), counts.grid_zoom)
    desired = read_desired(deps.control)
    previous = _previous(deps, desired)
    state, note = deps.state.load()
    if state.last_published_at is None:  # a state saved before any publish, or none yet: the policy record knows
        last = _last_published(deps)
        state = state if last is None else state.published(last)
    return _Inputs(manifest, counts, events, desired, previous, state, (*([note] if note else []), *skipped),
                   deps.clock())


def _decide(deps: PartitionerDeps, inputs: _Inputs) -> Step:
    """The controller step on ``inputs`` with the declared crowds and the fast path's surges (the next version is the
    desired one's + 1)."""
    policy = replace(deps.policy, crowds=(*_declared_crowds(deps), *_relieved_surges(deps, inputs.now)))
    version = inputs.desired.version + 1 if inputs.desired else 1
    return _step(deps, policy, inputs.manifest, inputs.counts, inputs.events, inputs.previous, version,
                 inputs.state, inputs.now)


def _declared_crowds(deps: PartitionerDeps) -> tuple[DeclaredCrowd, ...]:
    """The crowds the operator declared (:data:`CROWDS_KEY` in the specs bucket; none without the object).

    One ``GetObject`` per snapshot window. A bad file rejects the snapshot (``bad_crowds``), naming the object and
    the bad value: sizing on without the crowds the operator expects would hide the mistake until the match.
    """
    if deps.crowds is None:
        return ()
    raw = deps.crowds.read(CROWDS_KEY)
    if raw is None:
        return ()
    try:
        return parse_crowds(raw, f"s3://{deps.crowds.bucket}/{CROWDS_KEY}")
    except PolicyError as exc:
        raise SnapshotRejected("bad_crowds", str(exc)) from None


def _relieved_surges(deps: PartitionerDeps, now: float) -> tuple[DeclaredCrowd, ...]:
    """The surges the fast path relieved that have not ended (:data:`SURGES_KEY`; none without the object).

    One ``GetObject`` per snapshot window. Unlike declared crowds, a file that does not parse is skipped (the fast
    path writes it, and rewrites it whole at its next relief): sizing without a surge is what the window path did
    before there was a fast path.
    """
    if deps.crowds is None:
        return ()
    raw = deps.crowds.read(SURGES_KEY)
    if raw is None:
        return ()
    try:
        return tuple(c for c in parse_crowds(raw, f"s3://{deps.crowds.bucket}/{SURGES_KEY}") if c.end > now)
    except PolicyError:
        return ()


def _step(deps: PartitionerDeps, policy: ControlSettings, manifest: Manifest, counts: Counts, events: Counts,
          previous: Spec | None, version: int, state: ControlState, now: float) -> Step:
    """One controller step with the Lambda's builder; a build error or an invalid candidate rejects the snapshot.

    ``counts`` is the load to balance (cost-weighted when rates are known); ``events`` the plain counts
    the load history follows (so a cell's first cost rate is not mistaken for a surge).
    """
    window_s = max(1.0, (manifest.record.window_end - manifest.record.window_start).total_seconds())

    def build(c: Counts, fill: float) -> Spec:
        built = deps.build(c, deps.max_load, previous=previous, version=version,
                           stream_name=geo_stream_name(deps.prefix, version), fill=fill)
        spec = with_shards(built, deps.shards_per_worker).replace(
            source={**built.source, "window_end": manifest.record.window_end_iso, "window_s": window_s})
        problems = validate(spec)
        if problems:
            raise SnapshotRejected("invalid_spec", f"candidate spec v{spec.version!r} from {manifest.key} is invalid: "
                                                   + "; ".join(problems[:5]))
        return spec

    try:
        return control_step(policy, state, counts, window_end=manifest.record.window_end.timestamp(),
                            window_s=window_s, now=now, current=previous, max_load=deps.max_load, build=build,
                            latency_s=median_latency_s(read_latency_samples(deps.control)), events=events)
    except PartitionerError as exc:
        raise SnapshotRejected("build_failed", f"{manifest.key}: {exc}") from None


def _previous(deps: PartitionerDeps, desired: DesiredPointer | None) -> Spec | None:
    if desired is None:
        return None
    try:
        return deps.specs.get(desired.spec_key)
    except PartitionerError as exc:
        raise SnapshotRejected("previous_spec_unreadable", f"desired spec v{desired.version}: {exc}") from None


def _last_published(deps: PartitionerDeps) -> float | None:
    item = deps.control.get(ControlKey.POLICY)
    return PolicyMark.from_item(item).last_published_at if item else None


def _publish(deps: PartitionerDeps, manifest_key: str, manifest: Manifest, candidate: Spec, step: Step,
             reasons: tuple[str, ...], inputs: _Inputs) -> Outcome:
    """Publish ``candidate`` (:func:`lambdas.partitioner.publish.publish`); ``raced`` when ``desired`` moved since
    ``inputs`` read it (the caller takes the step again)."""
    now = inputs.now
    try:
        done = publish(deps.specs, deps.control, deps.prefix, candidate,
                       inputs.desired.version if inputs.desired else None, now)
    except PublishFailed as exc:
        raise SnapshotRejected("publish_failed", str(exc)) from None
    if done.spec is None:
        return Outcome(OutcomeStatus.SUPERSEDED, manifest_key, f"desired moved to v{done.desired} while v{candidate.version} was "
                       f"built on v{inputs.desired.version if inputs.desired else '-'}", "raced",
                       version=done.desired)
    spec = done.spec
    decision = {**step.decision.to_dict(), "published_version": spec.version}
    deps.control.put(ControlKey.POLICY, PolicyMark(now, decision).to_item())
    deps.state.save(step.state.published(now))
    _mark(deps, manifest_key, manifest.record.checksum, manifest.record.window_end_iso, f"published v{spec.version}")
    return Outcome(OutcomeStatus.PUBLISHED, manifest_key, "; ".join(reasons), "published", version=spec.version, spec_key=done.key,
                   workers=len(spec.workers), decision_reasons=reasons, max_utilisation=_live_utilisation(step))


def _live_utilisation(step: Step) -> float | None:
    """Max worker utilisation of the live spec under the snapshot's load (None on cold start)."""
    return step.observed.max_utilisation if step.observed is not None else None


def _mark(deps: PartitionerDeps, manifest_key: str, checksum: str, window_end: str, outcome: str) -> None:
    deps.control.put(ControlKey.SNAPSHOT, SnapshotMark(manifest_key, checksum, window_end, now_iso(), outcome).to_item(),
                     condition="attribute_not_exists(pk) OR window_end < :w", values={":w": window_end})
