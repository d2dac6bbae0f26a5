"""The partitioner's half of the fast path: a router's surge signal -> a relief published as the next spec version.

Entry: :func:`process_surge` for one signal object (``control/surge/...``, :mod:`geokernel.contracts.surge`), from the
partitioner Lambda's S3 notification on :data:`~geokernel.contracts.surge.SIGNAL_PREFIX` in the specs bucket. In order:

1. read the signal (a signal that does not decode is ``rejected``: a router wrote it, nothing to retry);
2. read ``desired`` and its spec: the relief is built on the newest published spec, not on the one the signal was
   measured under (a window spec published since may have moved the cell already);
3. :func:`partitioner.control.relief.relieve` (the code the simulator runs): only the surging cells move, each
   projected to when the window path can take over (its measured snapshot-to-live latency and a window) and placed
   within the window path's last ``fill`` (``pk="policy"``'s last decision);
4. publish it the window path's way (:func:`lambdas.partitioner.publish.publish`: the spec object, then ``desired`` by
   compare and swap on the version it was built on); a race with the window path (or another signal) builds the
   relief again on the new ``desired``, at most :data:`~lambdas.partitioner.logic.MAX_RACES` times;
5. keep the moved cells as surges for the window path (:data:`~geokernel.contracts.surge.SURGES_KEY`, the declared
   crowds' format: it sizes for them until they end), replaced with ``If-Match`` on the object read.

Nothing here touches the window path's own records (``pk="policy"``, ``pk="snapshot"``, the controller state): a
relief is a spec version like another, which the deployer swaps in carry mode, moving only the cells it moved.
"""

from __future__ import annotations

from dataclasses import dataclass

from geokernel.contracts.control import ControlKey, PolicyMark
from geokernel.contracts.errors import ContractError
from geokernel.contracts.outcome import OutcomeStatus
from geokernel.contracts.stream import geo_stream_name
from geokernel.contracts.surge import SURGES_KEY, SurgeSignal
from geokernel.errors import PolicyError
from geokernel.partition_spec.model import Spec
from geokernel.partition_spec.rules import validate
from geokernel.partition_spec.shards import with_shards
from lambdas.partitioner.logic import MAX_RACES, PartitionerDeps
from lambdas.partitioner.publish import publish
from lambdas.runtime.records import median_latency_s, read_desired, read_latency_samples
from partitioner.control.crowds import DeclaredCrowd, crowds_json, parse_crowds
from partitioner.control.relief import Relief, merge_surges, relieve

MAX_SURGE_WRITES = 3  # tries to add surges to SURGES_KEY when another invocation replaced it meanwhile


@dataclass(frozen=True)
class SurgeOutcome:
    """What :func:`process_surge` did: ``published`` (a relief version), ``held`` (nothing to move), ``superseded``
    (``desired`` kept moving), ``rejected`` (the signal is unreadable). ``reason`` is the relief's line."""

    status: OutcomeStatus
    signal_key: str
    reason: str
    code: str
    version: int | None = None
    moved: tuple[str, ...] = ()


def process_surge(deps: PartitionerDeps, key: str) -> SurgeOutcome:
    """Relieve the surge signalled at ``key``; see the module docstring. Raises only for AWS failures (retried)."""
    if deps.surges is None:
        return SurgeOutcome(OutcomeStatus.REJECTED, key, "no surge store configured", "no_store")
    try:
        signal = deps.surges.signal(key)
    except ContractError as exc:
        return SurgeOutcome(OutcomeStatus.REJECTED, key, str(exc), "bad_signal")
    if signal is None:
        return SurgeOutcome(OutcomeStatus.REJECTED, key, f"s3://{deps.surges.bucket}/{key} does not exist", "missing_signal")
    outcome = SurgeOutcome(OutcomeStatus.SUPERSEDED, key, "desired moved at every try", "superseded")
    for _ in range(MAX_RACES):
        desired = read_desired(deps.control)
        if desired is None:
            return SurgeOutcome(OutcomeStatus.HELD, key, "no spec published yet", "held")
        now = deps.clock()
        relief = _relief(deps, deps.specs.get(desired.spec_key), signal, now)
        reason = "; ".join(relief.reasons)
        if relief.spec is None:
            return SurgeOutcome(OutcomeStatus.HELD, key, reason, "held")
        candidate = with_shards(relief.spec, deps.shards_per_worker)
        problems = validate(candidate)
        if problems:
            return SurgeOutcome(OutcomeStatus.REJECTED, key, f"relief v{candidate.version} is invalid: {'; '.join(problems[:5])}",
                                "invalid_spec")
        done = publish(deps.specs, deps.control, deps.prefix, candidate, desired.version, now)
        if done.spec is None:
            outcome = SurgeOutcome(OutcomeStatus.SUPERSEDED, key, f"desired moved to v{done.desired} while the relief was built "
                                   f"on v{desired.version}", "superseded", done.desired)
            continue
        _remember(deps, relief.surges, now)
        return SurgeOutcome(OutcomeStatus.PUBLISHED, key, reason, "published", done.spec.version,
                            tuple(m.quadkey for m in relief.moves))
    return outcome


def _relief(deps: PartitionerDeps, desired: Spec, signal: SurgeSignal, now: float) -> Relief:
    """The relief of ``signal`` on ``desired``: cells projected over the window path's latency and a window, placed
    within its last fill."""
    latency = median_latency_s(read_latency_samples(deps.control))
    if latency is None:
        latency = deps.policy.latency_s if deps.policy.latency_s is not None else signal.window_s
    reach = latency + signal.window_s
    return relieve(desired, signal, fill=_fill(deps, desired), reach_s=reach, hold_s=reach + signal.window_s,
                   now=now, stream_name=geo_stream_name(deps.prefix, desired.version + 1),
                   taken=tuple(w for w, _ in signal.loads))


def _fill(deps: PartitionerDeps, desired: Spec) -> float:
    """The window path's last fill (``pk="policy"``), else the fill ``desired`` was built to, else 1."""
    item = deps.control.get(ControlKey.POLICY)
    details = PolicyMark.from_item(item).last_decision.get("details") if item else None
    fill = details.get("fill") if isinstance(details, dict) else None
    if not isinstance(fill, int | float):
        built = desired.source.get("fill")
        fill = built if isinstance(built, int | float) else 1.0
    return min(1.0, max(0.05, float(fill)))


def _remember(deps: PartitionerDeps, surges: tuple[DeclaredCrowd, ...], now: float) -> None:
    """Add ``surges`` to :data:`SURGES_KEY` (those that ended dropped), replacing the object only if it is still the
    one read; an object that does not parse is replaced."""
    if deps.surges is None or not surges:
        return
    for _ in range(MAX_SURGE_WRITES):
        raw, etag = deps.surges.surges()
        try:
            kept = parse_crowds(raw, f"s3://{deps.surges.bucket}/{SURGES_KEY}") if raw is not None else ()
        except PolicyError:
            kept = ()
        body = crowds_json(merge_surges(kept, surges, now))
        if deps.surges.put_surges(body, etag):
            return
