"""Per-entity order across partial put failures: a batch goes out in waves of at most one record per entity.

``PutRecords`` writes the records of one request independently: "a single record failure does not stop the
processing of subsequent records", so "PutRecords doesn't guarantee the ordering of records"
(https://docs.aws.amazon.com/kinesis/latest/APIReference/API_PutRecords.html). If an entity's earlier record failed
and its later one was written in the same request, the event source mapping re-delivers the batch from the failed
record and the stream holds the later event before the earlier one: a worker processes the entity out of order.

:func:`entity_waves` yields the batch's records in waves, each holding the next record of every entity still going
(in each entity's ingest order), so no request ever carries two records of one entity; the caller adds an entity to
``blocked`` when its put failed, and the entity sends nothing more in this batch: its failed record and every later
one are reported failed and re-delivered in order. One wave per record of the busiest entity: most batches are one
wave (an entity seldom has two events in one batching window), a catch-up batch a few.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def entity_waves(items: Sequence[T], entity_of: Callable[[T], str], blocked: set[str]) -> Iterator[list[T]]:
    """Waves of ``items`` (in order) with at most one item per entity, skipping the entities in ``blocked``.

    Notes
    -----
    ``blocked`` is read at each wave, so an entity the caller blocks after a failed put in wave ``k`` is left out of
    waves ``k + 1`` and on. An empty ``items`` yields nothing.
    """
    pending: dict[str, list[T]] = {}
    for it in items:
        pending.setdefault(entity_of(it), []).append(it)
    depth = max((len(v) for v in pending.values()), default=0)
    for r in range(depth):
        wave = [v[r] for e, v in pending.items() if len(v) > r and e not in blocked]
        if wave:
            yield wave
