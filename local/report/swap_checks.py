"""The checks every swap must pass, on the enriched records (:class:`local.output.Processed`).

:func:`order_check`: for each entity, every record read from stream n was processed before any of its records from
a stream m > n. :func:`flip_check`: the router flips each entity once: no record of it went to stream n after one
went to a stream m > n (judged by when the replay sent them, which is the order the router reads them in; copies of
an event that also went to a newer stream are a retried batch's, not a flip back). :func:`reader_check`: never two readers of one cell at once: for each zoom-12 cell, the processing
intervals of different processes overlap neither across versions nor within one slot of one version; different
slots of one version may share a cell, split by entity or by finer squares.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from local.output import Processed

SAMPLES = 5  # violations quoted per check


@dataclass(frozen=True)
class Check:
    """One swap invariant: how much it looked at, how many violations, a few examples."""

    checked: int
    violations: int
    sample: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.violations == 0


def order_check(records: Iterable[Processed]) -> Check:
    """Per entity: the last record of stream n processed before the first of any stream m > n.

    A violation names both events and when each was sent, so a record the router put on the old stream after the
    entity's record on the new one (a router behind the flip) reads apart from one the handover gate let pass early,
    and says when the late one is a copy (its event was processed earlier too: at-least-once re-reading).
    """
    recs = list(records)
    first: dict[str, int] = {}
    for r in recs:
        first[r.event_id] = min(r.processed_ms, first.get(r.event_id, r.processed_ms))
    checked, late = _late_across_versions(recs, lambda r: r.processed_ms, ties_late=True)
    bad = [_order_violation(entity, old, new, first) for entity, old, new in late]
    return Check(checked, len(bad), tuple(bad[:SAMPLES]))


def _order_violation(entity: str, old: Processed, new: Processed, first: dict[str, int]) -> str:
    sent = ("" if old.sent_ms is None or new.sent_ms is None else
            f"; sent {(old.sent_ms - new.sent_ms) / 1000:+.3f} s after it"
            + (" (put on the old stream after the new one)" if old.sent_ms > new.sent_ms else ""))
    copy = f"; a copy, first processed at {first[old.event_id]} ms" if first[old.event_id] < old.processed_ms else ""
    return (f"{entity}: v{old.version} record {old.event_id} processed at {old.processed_ms} ms, after "
            f"v{new.version} record {new.event_id} at {new.processed_ms} ms{sent}{copy}")


def flip_check(records: Iterable[Processed]) -> Check:
    """Per entity: every record of stream n sent before the first one of any stream m > n (module docstring)."""
    recs = [r for r in records if r.sent_ms is not None]
    newest: dict[str, int] = {}
    for r in recs:
        newest[r.event_id] = max(r.version, newest.get(r.event_id, r.version))
    # a copy of an event that also went to a newer stream is a batch retried after the flip, not a flip back
    kept = [r for r in recs if newest[r.event_id] == r.version]
    checked, late = _late_across_versions(kept, lambda r: r.sent_ms or 0, ties_late=False)
    bad = [f"{entity}: {old.event_id} sent at {old.sent_ms} ms went to v{old.version}, after {new.event_id} sent at "
           f"{new.sent_ms} ms went to v{new.version}" for entity, old, new in late]
    return Check(checked, len(bad), tuple(bad[:SAMPLES]))


def _late_across_versions(records: Iterable[Processed], at: Callable[[Processed], int], *, ties_late: bool
                          ) -> tuple[int, list[tuple[str, Processed, Processed]]]:
    """Per entity, each pair of versions n < m where the latest record of n (by ``at``) is later than the earliest
    of m (or as late, with ``ties_late``): ``(entities seen, [(entity, that record of n, that record of m)])``."""
    spans: dict[str, dict[int, list[Processed]]] = defaultdict(dict)
    for r in records:
        span = spans[r.entity].setdefault(r.version, [r, r])
        if at(r) < at(span[0]):
            span[0] = r
        if at(r) > at(span[1]):
            span[1] = r
    late: list[tuple[str, Processed, Processed]] = []
    for entity, by_version in sorted(spans.items()):
        versions = sorted(by_version)
        for i, n in enumerate(versions):
            for m in versions[i + 1:]:
                old, new = by_version[n][1], by_version[m][0]
                if at(old) > at(new) or (ties_late and at(old) == at(new)):
                    late.append((entity, old, new))
    return len(spans), late


def reader_check(records: Iterable[Processed]) -> Check:
    """No cell read by two processes at once (see the module docstring for which pairs count)."""
    spans: dict[str, dict[tuple[int, str, str], list[int]]] = defaultdict(dict)
    for r in records:
        span = spans[r.cell].setdefault((r.version, r.worker, r.owner), [r.processed_ms, r.processed_ms])
        span[0], span[1] = min(span[0], r.processed_ms), max(span[1], r.processed_ms)
    bad: list[str] = []
    for cell, readers in sorted(spans.items()):
        items = sorted(readers.items(), key=lambda kv: kv[1][0])
        for i, ((v1, w1, o1), (a1, b1)) in enumerate(items):
            for (v2, w2, o2), (a2, b2) in items[i + 1:]:
                if a2 > b1:
                    break  # sorted by start: no later reader overlaps this one
                if o1 != o2 and (v1 != v2 or w1 == w2):
                    bad.append(f"cell {cell}: {o1} (v{v1}/{w1}, {a1}-{b1} ms) and {o2} (v{v2}/{w2}, {a2}-{b2} ms)")
    return Check(len(spans), len(bad), tuple(bad[:SAMPLES]))
