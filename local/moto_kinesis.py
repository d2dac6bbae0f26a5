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

This reaches into moto's internals, so it guards itself. A record's ``created_at`` is a float of epoch seconds
up to moto 5.2.5 and a ``datetime`` from 5.2.6 on (the lag is taken from either). :func:`install` first reads a
probe shard both ways, at every position and limit; when the answers differ, or moto's ``Shard`` lacks what this
relies on, it leaves moto's own methods in place and returns one line naming the moto version and what differed
(the local run prints it and runs on, slower). It never patches a method it has not seen answer as moto's own, so
a new moto cannot crash the server thread through it.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from importlib.metadata import version
from typing import Any

_INSTALLED = "_georebal_constant_time"
#: moto's own methods, kept by :func:`install` (the tests compare the two on the same shards).
MOTO_METHODS: dict[str, Any] = {}


def lag_ms(newest: Any, oldest: Any) -> int:
    """Milliseconds from ``oldest``'s arrival to ``newest``'s, as moto computes ``MillisBehindLatest``.

    moto up to 5.2.5 stamps a record's ``created_at`` with epoch seconds (a float); 5.2.6 with a ``datetime``,
    whose difference is a ``timedelta``.
    """
    delta = newest - oldest
    seconds = delta.total_seconds() if isinstance(delta, timedelta) else float(delta)
    return int(seconds * 1000)


def _first_sequence_number(self: Any) -> int:
    return next(iter(self.records), 0)


def _last_sequence_number(self: Any) -> int:
    return next(reversed(self.records), 0)


def _fast_get_records(walk: Any) -> Any:
    """moto's ``Shard.get_records`` in O(records returned), falling back to ``walk`` (moto's own) on a gap."""
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
        return results, stop - 1, lag_ms(records[last].created_at, results[-1].created_at)
    return get_records


def _answers(get_records: Any, first: Any, last: Any, shard: Any, position: str, limit: int | None) -> tuple[Any, ...]:
    records, end, behind_ms = get_records(shard, position, limit)
    return [r.sequence_number for r in records], end, behind_ms, first(shard), last(shard)


def probe(shard_class: Any, own: dict[str, Any], fast: dict[str, Any]) -> str | None:
    """None when ``fast`` answers as ``own`` on probe shards of 0, 1 and 6 records; else what differed."""
    try:
        for n in (0, 1, 6):
            shard = shard_class(0, 0, 2**128 - 1)
            for i in range(n):
                shard.put_record(f"pk{i}", f"data{i}", str(i))
            for position, limit in itertools.product(range(-1, n + 2), (None, 1, 2, 500)):
                args = (shard, str(position), limit)
                mine = _answers(fast["get_records"], fast["get_min_sequence_number"], fast["get_max_sequence_number"], *args)
                theirs = _answers(own["get_records"], own["get_min_sequence_number"], own["get_max_sequence_number"], *args)
                if mine != theirs:
                    return f"a shard of {n} read from {position} with limit {limit}: {mine!r} != moto's {theirs!r}"
    except Exception as exc:  # any shape this module does not know: refuse, never crash the server
        return f"{type(exc).__name__}: {exc}"
    return None


def install() -> str | None:
    """Patch :class:`moto.kinesis.models.Shard` in this process (idempotent).

    Returns
    -------
    str or None
        None when the fast methods are in place; else one line naming the moto version and why moto's own
        methods were kept (the caller prints it; the run goes on, slower).
    """
    from moto.kinesis.models import Shard

    if getattr(Shard, _INSTALLED, False):
        return None
    own = {name: getattr(Shard, name, None) for name in ("get_min_sequence_number", "get_max_sequence_number",
                                                         "get_records")}
    if any(fn is None for fn in own.values()):
        missing = sorted(name for name, fn in own.items() if fn is None)
        return f"moto {version('moto')}: Shard has no {', '.join(missing)}; local/moto_kinesis.py kept moto's own reads"
    fast = {"get_min_sequence_number": _first_sequence_number, "get_max_sequence_number": _last_sequence_number,
            "get_records": _fast_get_records(own["get_records"])}
    why = probe(Shard, own, fast)  # the probe's puts run moto's own put (not patched yet)
    if why is not None:
        return f"moto {version('moto')}: its Kinesis shard differs from the one local/moto_kinesis.py knows ({why}); kept moto's own reads"
    MOTO_METHODS.update(own)
    for name, fn in fast.items():
        setattr(Shard, name, fn)
    setattr(Shard, _INSTALLED, True)
    return None
