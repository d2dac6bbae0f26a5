"""Per-snapshot partitioner logic, callable in-process (the Lambda handler and the local loop use it).

:func:`process_snapshot` takes one manifest key and does, in order:

1. **Idempotence / staleness**: control ``pk="snapshot"`` records the last processed manifest key,
   checksum and window end. The same key and checksum again is a ``duplicate`` (no-op); a window
   ending at or before the last processed one is ``rejected`` as ``stale_snapshot``.
2. **Verify** the manifest and every data file (:mod:`lambdas.partitioner.snapshot`); an empty
   snapshot is rejected.
3. **Read rows** with :func:`partitioner.counts.read_snapshot_rows`. When the snapshot carries no
   cost column, the latest worker cost reports of the *active* version are merged in: the weight of
   a row is ``events * rate(grid-zoom ancestor)``; cells without a reported rate get the
   events-weighted mean rate of those with one (so totals stay comparable with ``MAX_LOAD``).
4. **Build** the candidate with :func:`partitioner.build.build_spec` (previous = the desired spec for
   stickiness, ``version = desired + 1``, ``stream_name = <prefix>-geo-v<n>``) and validate it.
5. **Policy**: :meth:`partitioner.policy.RebalancePolicy.decide` (the first spec is always published);
   ``pk="policy"`` records ``last_published_at`` (epoch s) and ``last_decision`` (``Decision.to_dict()``).
6. **Publish** (only if the policy says so): put ``specs/v<n:08d>.json`` with ``If-None-Match: *``
   (never overwrite), then the conditional put of control ``pk="desired"`` (version only moves
   forward), then ``pk="policy"`` and ``pk="snapshot"``.

A rejected snapshot publishes nothing and leaves every pointer as it was.

Local-loop use::

    deps = PartitionerDeps.from_config(LambdaConfig.from_env(), make_clients(cfg))
    outcome = process_snapshot(deps, "snapshots/window_end=.../_manifest.json")
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from lambdas.common.aws import (
    AdapterError,
    Clients,
    ControlTable,
    CostReports,
    ObjectStore,
    SpecExists,
    SpecStore,
    now_iso,
    spec_key,
)
from lambdas.common.config import (
    CONTROL_TABLE,
    MAX_LOAD,
    SNAPSHOTS_BUCKET,
    SPECS_BUCKET,
    ConfigError,
    LambdaConfig,
)
from lambdas.common.records import (
    DESIRED,
    POLICY,
    SNAPSHOT,
    DesiredPointer,
    PolicyMark,
    SnapshotMark,
    read_active,
    read_desired,
    to_item,
)
from lambdas.partitioner.snapshot import SnapshotRejected, parse_manifest, read_rows, verify_manifest
from partitioner.build import build_spec
from partitioner.counts import Counts, read_snapshot_rows
from partitioner.errors import PartitionerError, PolicyError
from partitioner.policy import Decision, RebalancePolicy
from partitioner.spec import Spec, validate

Builder = Callable[..., Spec]
MAX_VERSION_RETRIES = 3


@dataclass(frozen=True)
class Outcome:
    """What :func:`process_snapshot` did.

    ``status``: ``published`` | ``held`` (policy said no) | ``duplicate`` | ``rejected`` | ``superseded``
    (a newer version was published concurrently). ``reason`` names the rule or bad value.
    """

    status: str
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
    policy: RebalancePolicy
    build: Builder = build_spec
    clock: Callable[[], float] = time.time

    @classmethod
    def from_config(cls, cfg: LambdaConfig, clients: Clients) -> PartitionerDeps:
        cfg.require(CONTROL_TABLE, SNAPSHOTS_BUCKET, SPECS_BUCKET, MAX_LOAD)
        return cls(control=ControlTable(clients.dynamodb, cfg.control_table),
                   snapshots=ObjectStore(clients.s3, cfg.snapshots_bucket),
                   specs=SpecStore(clients.s3, cfg.specs_bucket),
                   costs=CostReports(clients.s3, cfg.costs_bucket) if cfg.costs_bucket else None,
                   max_load=float(cfg.max_load or 0.0), prefix=cfg.prefix, policy=load_policy(cfg.policy_json))


def load_policy(policy_json: str) -> RebalancePolicy:
    """Return the :class:`partitioner.policy.RebalancePolicy` of ``POLICY_JSON`` (defaults when empty)."""
    try:
        return RebalancePolicy.from_json(policy_json, where="environment variable POLICY_JSON")
    except PolicyError as exc:
        raise ConfigError(str(exc)) from None


def apply_cost_rates(counts: Counts, rates: dict[str, float], grid_zoom: int) -> Counts:
    """Return ``counts`` with each row weighted by the cost rate of its grid-zoom ancestor.

    Rows whose cell has no rate get the events-weighted mean rate of the rows that have one.
    """
    if not rates:
        return counts
    anc = [q[:grid_zoom] for q in counts.quadkeys]
    known = np.fromiter((rates.get(a, np.nan) for a in anc), dtype=np.float64, count=len(anc))
    has = ~np.isnan(known)
    if not has.any():
        return counts
    w = np.asarray(counts.weights, dtype=np.float64)
    grid_rows = np.fromiter((len(q) == grid_zoom for q in counts.quadkeys), dtype=bool, count=len(anc))
    sel = has & grid_rows
    denom = float(w[sel].sum())
    mean = float((w[sel] * known[sel]).sum() / denom) if denom > 0 else float(np.nanmean(known))
    factors = np.where(has, known, mean)
    return counts.scaled(factors)


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
        return Outcome("rejected", manifest_key, str(exc), exc.code)


def _process(deps: PartitionerDeps, manifest_key: str) -> Outcome:
    raw = deps.snapshots.read(manifest_key)
    if raw is None:
        raise SnapshotRejected("missing_file", f"manifest s3://{deps.snapshots.bucket}/{manifest_key} does not exist")
    manifest = parse_manifest(raw, f"s3://{deps.snapshots.bucket}/{manifest_key}")
    mark_item = deps.control.get(SNAPSHOT)
    mark = SnapshotMark.from_item(mark_item) if mark_item else None
    if mark and mark.manifest_key == manifest_key and mark.checksum == manifest.checksum:
        return Outcome("duplicate", manifest_key, f"already processed at {mark.processed_at} ({mark.outcome})",
                       "duplicate")
    if mark and manifest.window_end_iso <= mark.window_end:
        raise SnapshotRejected("stale_snapshot", f"{manifest.key}: window_end {manifest.window_end_iso!r} is not after "
                                                 f"the last processed {mark.window_end!r} ({mark.manifest_key})")
    verify_manifest(manifest)
    text = read_rows(deps.snapshots, manifest)
    try:
        counts = read_snapshot_rows(text, manifest.key, use_cost=manifest.has_cost)
    except PartitionerError as exc:
        raise SnapshotRejected("bad_rows", str(exc)) from None
    if counts.total <= 0:
        raise SnapshotRejected("empty_snapshot", f"{manifest.key}: total load is {counts.total!r}")
    active = read_active(deps.control)
    if not manifest.has_cost and deps.costs is not None and active is not None:
        try:
            rates = deps.costs.latest(active.version).rates
        except AdapterError:
            rates = {}
        counts = apply_cost_rates(counts, dict(rates), counts.grid_zoom)
    desired = read_desired(deps.control)
    previous = _previous(deps, desired)
    version = (desired.version if desired else 0) + 1
    try:
        candidate = deps.build(counts, deps.max_load, previous=previous, version=version,
                               stream_name=f"{deps.prefix}-geo-v{version}", fill=deps.policy.target_fill)
    except PartitionerError as exc:
        raise SnapshotRejected("build_failed", f"{manifest.key}: {exc}") from None
    problems = validate(candidate)
    if problems:
        raise SnapshotRejected("invalid_spec", f"candidate spec v{candidate.version!r} from {manifest.key} is invalid: "
                                               + "; ".join(problems[:5]))
    now = deps.clock()
    decision = _decide(deps, previous, candidate, counts, now)
    reasons = tuple(decision.reasons)
    if not decision.redeploy:
        _mark(deps, manifest_key, manifest.checksum, manifest.window_end_iso, "held")
        deps.control.put(POLICY, to_item(PolicyMark(_last_published(deps), decision.to_dict())))
        return Outcome("held", manifest_key, "policy: " + "; ".join(reasons), "held", decision_reasons=reasons,
                       workers=len(candidate.workers), max_utilisation=_live_utilisation(decision))
    return _publish(deps, manifest_key, manifest.checksum, manifest.window_end_iso, candidate, decision, now)


def _previous(deps: PartitionerDeps, desired: DesiredPointer | None) -> Spec | None:
    if desired is None:
        return None
    try:
        return deps.specs.get(desired.spec_key)
    except PartitionerError as exc:
        raise SnapshotRejected("previous_spec_unreadable", f"desired spec v{desired.version}: {exc}") from None


def _last_published(deps: PartitionerDeps) -> float | None:
    item = deps.control.get(POLICY)
    return PolicyMark.from_item(item).last_published_at if item else None


def _decide(deps: PartitionerDeps, current: Spec | None, candidate: Spec, counts: Counts, now: float) -> Decision:
    last = _last_published(deps)
    return deps.policy.decide(current, candidate, counts, datetime.fromtimestamp(now, UTC),
                              None if last is None else datetime.fromtimestamp(last, UTC))


def _publish(deps: PartitionerDeps, manifest_key: str, checksum: str, window_end: str, candidate: Spec,
             decision: Decision, now: float) -> Outcome:
    reasons = tuple(decision.reasons)
    spec = candidate
    key = ""
    for _ in range(MAX_VERSION_RETRIES):
        try:
            key = deps.specs.put_new(spec)
            break
        except SpecExists:
            # an orphan object from a publish that crashed before the pointer moved: take the next number
            latest = read_desired(deps.control)
            if latest is not None and latest.version >= spec.version:
                return Outcome("superseded", manifest_key, f"spec v{latest.version} was published concurrently",
                               "superseded", version=latest.version)
            n = spec.version + 1
            spec = spec.replace(version=n, stream_name=f"{deps.prefix}-geo-v{n}")
    else:
        raise SnapshotRejected("publish_failed", f"no free spec version after {spec.version!r} "
                                                 f"(objects exist under {spec_key(spec.version)!r})")
    stamp = now_iso(now)
    moved = deps.control.put_forward(DESIRED, to_item(DesiredPointer(spec.version, key, stamp)))
    if not moved:
        latest = read_desired(deps.control)
        return Outcome("superseded", manifest_key,
                       f"desired already at v{latest.version if latest else '?'}; v{spec.version} left unpublished",
                       "superseded", version=spec.version, spec_key=key)
    deps.control.put(POLICY, to_item(PolicyMark(now, {**decision.to_dict(), "published_version": spec.version})))
    _mark(deps, manifest_key, checksum, window_end, f"published v{spec.version}")
    return Outcome("published", manifest_key, "; ".join(reasons), "published", version=spec.version, spec_key=key,
                   workers=len(spec.workers), decision_reasons=reasons, max_utilisation=_live_utilisation(decision))


def _live_utilisation(decision: Decision) -> float | None:
    """Max worker utilisation of the live spec under the snapshot's load (None on cold start)."""
    return decision.current_metrics.max_utilisation if decision.current_metrics is not None else None


def _mark(deps: PartitionerDeps, manifest_key: str, checksum: str, window_end: str, outcome: str) -> None:
    deps.control.put(SNAPSHOT, to_item(SnapshotMark(manifest_key, checksum, window_end, now_iso(), outcome)),
                     condition="attribute_not_exists(pk) OR window_end < :w", values={":w": window_end})
