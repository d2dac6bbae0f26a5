"""EventBridge ``PutEvents``: entries batched within the request limits, failed entries retried.

:func:`put_events` sends request entries (``Source``, ``DetailType``, ``Detail``, ``EventBusName``, optional
``Time`` and ``Resources``) in as few calls as the limits allow and returns what it took (:class:`PutResult`).

Notes
-----
* **Limits.** A ``PutEvents`` call takes at most :data:`MAX_ENTRIES` (10) entries
  (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html), whose total size must be less than
  256 KB, an entry's size counted as EventBridge counts it (:func:`entry_size`: 14 bytes for ``Time``, the UTF-8 bytes
  of ``Source``, ``DetailType``, ``Detail`` and each ``Resources`` entry;
  https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevent-size.html). :func:`batches` cuts the entries in
  their order at whichever comes first; an entry too big alone raises :class:`EventSinkError` naming it. Up to
  :data:`CONCURRENCY` calls are in flight at once (boto3 clients are thread-safe).
* **Failed entries.** A call can succeed while some of its entries fail: ``FailedEntryCount`` and, per entry in
  request order, an ``ErrorCode`` (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevents.html). The
  retryable codes (:data:`RETRYABLE`: ``ThrottlingException``, ``InternalFailure``) are put again, alone, after an
  exponential pause, up to ``attempts`` calls per batch; any other code (``AccessDeniedException``,
  ``NotAuthorizedForSourceException``, ``MalformedDetail``, ...) cannot succeed on a retry and raises at once. A
  whole call that fails (throttled, a 5xx) is retried by the SDK's own retries (``standard`` mode) first.
* **Quota.** ``PutEvents`` is throttled per account and region in *requests* per second (10,000 in us-east-1,
  2,400 in us-east-2, fewer in smaller regions: https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-quota.html);
  batching 10 entries per call keeps the calls a tenth of the transitions. :class:`PutResult` counts the calls (the
  local run holds them against the quota: ``geokernel/aws_budget/quotas.py`` ``events.PutEvents``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from geo_service.adapters.aws import AwsError

MAX_ENTRIES = 10
#: The total entry size of one call must be less than this (256 KB).
MAX_BYTES = 256 * 1024
TIME_BYTES = 14
RETRYABLE = frozenset({"ThrottlingException", "InternalFailure"})
ATTEMPTS = 5
BASE_DELAY_S = 0.1
#: Calls in flight at once per flush: a flush of 300 transitions is 30 calls, about a second one after another at
#: 30 ms each, and the worker reads nothing meanwhile.
CONCURRENCY = 8


class EventSinkError(AwsError):
    """Entries could not be put (a code no retry fixes, retries used up, or an entry too big); names the bus and
    the code."""


@dataclass(frozen=True)
class PutResult:
    """What :func:`put_events` took: calls made, entries put, entries put again after a retryable failure."""

    calls: int = 0
    entries: int = 0
    retried: int = 0


def entry_size(entry: Mapping[str, Any]) -> int:
    """The size EventBridge counts for one request entry (module Notes)."""
    size = TIME_BYTES if entry.get("Time") is not None else 0
    for key in ("Source", "DetailType", "Detail"):
        size += len(str(entry.get(key) or "").encode("utf-8"))
    return size + sum(len(str(r).encode("utf-8")) for r in entry.get("Resources") or ())


def batches(entries: Sequence[Mapping[str, Any]], max_entries: int = MAX_ENTRIES,
            max_bytes: int = MAX_BYTES) -> list[list[Mapping[str, Any]]]:
    """``entries`` in order, cut into calls of at most ``max_entries`` entries totalling less than ``max_bytes``.

    Raises
    ------
    EventSinkError
        An entry is ``max_bytes`` or more alone (names its position and size).
    """
    out: list[list[Mapping[str, Any]]] = []
    size = 0
    for i, entry in enumerate(entries):
        n = entry_size(entry)
        if n >= max_bytes:
            raise EventSinkError(f"PutEvents entry #{i} is {n} bytes: an entry must be under {max_bytes} "
                                 f"(DetailType {entry.get('DetailType')!r})")
        if not out or len(out[-1]) >= max_entries or size + n >= max_bytes:
            out.append([])
            size = 0
        out[-1].append(entry)
        size += n
    return out


def put_events(client: Any, entries: Sequence[Mapping[str, Any]], *, attempts: int = ATTEMPTS,
               base_delay_s: float = BASE_DELAY_S, sleep: Callable[[float], None] = time.sleep,
               concurrency: int = CONCURRENCY) -> PutResult:
    """Put ``entries`` (module Notes): batched, up to ``concurrency`` calls at once, each batch's retryable failures
    put again up to ``attempts`` calls.

    Raises
    ------
    EventSinkError
        An entry failed with a code no retry fixes, or still failed after ``attempts`` calls (names the bus, the code
        and the message); the other batches are put first.
    """
    cut = batches(entries)

    def one(batch: list[Mapping[str, Any]]) -> tuple[int, int]:
        return _put_batch(client, batch, attempts, base_delay_s, sleep)

    if concurrency <= 1 or len(cut) <= 1:
        done = [one(b) for b in cut]
    else:
        with ThreadPoolExecutor(max_workers=min(concurrency, len(cut)), thread_name_prefix="put-events") as pool:
            done = list(pool.map(one, cut))
    return PutResult(sum(c for c, _ in done), len(entries), sum(r for _, r in done))


def _put_batch(client: Any, batch: list[Mapping[str, Any]], attempts: int, base_delay_s: float,
               sleep: Callable[[float], None]) -> tuple[int, int]:
    """One batch put, its retryable failures put again: ``(calls, entries put again)``."""
    retried = 0
    pending = list(batch)
    failed: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
    for attempt in range(max(1, attempts)):
        if attempt:
            retried += len(pending)
            sleep(base_delay_s * 2 ** (attempt - 1))
        answer = client.put_events(Entries=pending)
        failed = [(e, r) for e, r in zip(pending, answer.get("Entries", []), strict=False) if r.get("ErrorCode")]
        if not failed:
            return attempt + 1, retried
        fatal = next(((e, r) for e, r in failed if r["ErrorCode"] not in RETRYABLE), None)
        if fatal is not None:
            raise EventSinkError(_failure(fatal, len(failed), "cannot be retried"))
        pending = [e for e, _ in failed]
    raise EventSinkError(_failure(failed[0], len(failed), f"still failing after {max(1, attempts)} calls"))


def _failure(example: tuple[Mapping[str, Any], Mapping[str, Any]], failed: int, why: str) -> str:
    entry, result = example
    return (f"PutEvents to bus {entry.get('EventBusName', 'default')!r}: {failed} entries failed ({why}), e.g. "
            f"{result.get('ErrorCode')!r}: {result.get('ErrorMessage', '')!r} for detail "
            f"{str(entry.get('Detail', ''))[:160]!r}")
