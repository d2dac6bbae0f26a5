"""moto's Kinesis shard in constant time per record, so a long local run does not slow down as its streams fill.

moto 5.2 keeps a shard's records in an ``OrderedDict`` keyed by sequence number and, in
``Shard.put_record``, finds the last number with ``list(self.records.keys())[-1]``: every record put
copies every key the shard holds. ``Shard.get_records`` walks the shard from its first record to the
iterator's position on every call. Both grow with the shard, so a put or read of one record costs
O(records in the shard) and a run's cost grows with the square of its events: the local loop's main
process (the moto server, the router, the replay) ran at one full core on moto's key copies after
100,000 events and routed ~350 events/s (a py-spy profile of ``run-local --events`` at 1,111 events/s:
``Shard.get_max_sequence_number`` was the one hot frame).

:func:`install` replaces those three methods with ones that give the same answers in O(1) per record:
the first and last keys from the dict's ends, and reads that start at the iterator's position by key.
moto numbers a shard's records 1, 2, 3, ... (``put_record`` puts ``last + 1``; a split or a merge puts a
parent's records into the new shards the same way), so the keys from the first to the last are
consecutive; the fast read checks that and falls back to moto's own walk on a shard where they are not.
Nothing about what a client sees changes (``tests/local/test_moto_kinesis.py`` compares both on the same
shards); this only keeps the emulator's cost per call flat.
"""

from __future__ import annotations

from typing import Any

_INSTALLED = "_georebal_constant_time"
#: moto's own methods, kept by :func:`install` (the tests compare the two on the same shards).
MOTO_METHODS: dict[str, Any] = {}


def install() -> None:
    """Patch :class:`moto.kinesis.models.Shard` in this process (idempotent)."""
    from moto.kinesis.models import Shard

    if getattr(Shard, _INSTALLED, False):
        return
    MOTO_METHODS.update(get_min_sequence_number=Shard.get_min_sequence_number,
                        get_max_sequence_number=Shard.get_max_sequence_number, get_records=Shard.get_records)
    walk = Shard.get_records

    def first_sequence_number(self: Any) -> int:
        return next(iter(self.records), 0)

    def last_sequence_number(self: Any) -> int:
        return next(reversed(self.records), 0)

    def get_records(self: Any, last_sequence_id: str, limit: int | None) -> tuple[list[Any], int, int]:
        records = self.records
        if not records:
            return [], int(last_sequence_id), 0
        first, last = next(iter(records)), next(reversed(records))
        if last - first + 1 != len(records) or (limit is not None and limit < 1):  # gaps, or a limit the API
            return walk(self, last_sequence_id, limit)  # refuses: moto's own walk
        position = int(last_sequence_id)
        start = max(position + 1, first)
        stop = last + 1 if limit is None else min(last + 1, start + limit)
        if start >= stop:
            return [], position, 0
        results = [records[k] for k in range(start, stop)]
        behind_s = records[last].created_at - results[-1].created_at
        return results, stop - 1, int(behind_s * 1000)

    setattr(Shard, "get_min_sequence_number", first_sequence_number)  # noqa: B010 (assigning a method)
    setattr(Shard, "get_max_sequence_number", last_sequence_number)  # noqa: B010
    setattr(Shard, "get_records", get_records)  # noqa: B010
    setattr(Shard, _INSTALLED, True)
