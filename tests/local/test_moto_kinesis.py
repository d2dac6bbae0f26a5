"""local/moto_kinesis.py: the constant-time shard gives moto's own answers."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from moto.kinesis.models import Shard

from local import moto_kinesis


def _shard(n: int) -> Any:
    shard = Shard(0, 0, 2**128 - 1)
    for i in range(n):
        shard.put_record(f"pk{i % 7}", f"data{i}", str(i))
    return shard


def _answers(methods: dict[str, Any], shard: Any, position: str, limit: int | None) -> tuple[Any, ...]:
    records, last, behind_ms = methods["get_records"](shard, position, limit)
    return ([r.sequence_number for r in records], last, behind_ms, methods["get_min_sequence_number"](shard),
            methods["get_max_sequence_number"](shard))


@pytest.fixture(scope="module")
def methods() -> tuple[dict[str, Any], dict[str, Any]]:
    assert moto_kinesis.install() is None  # this moto's shard answers as the patch knows it
    assert moto_kinesis.install() is None  # idempotent: moto's methods are kept once
    fast = {name: getattr(Shard, name) for name in moto_kinesis.MOTO_METHODS}
    assert all(fast[name] is not moto_kinesis.MOTO_METHODS[name] for name in fast)
    return moto_kinesis.MOTO_METHODS, fast


def test_reads_and_ends_equal_motos_own_at_every_position_and_limit(methods: tuple[dict[str, Any], dict[str, Any]]
                                                                    ) -> None:
    # GIVEN shards of 0, 1 and 12 records put through the patched put (numbers 1..n)
    moto_own, fast = methods
    for n in (0, 1, 12):
        shard = _shard(n)
        assert list(shard.records) == list(range(1, n + 1))
        # WHEN read from every position (before the first, inside, at and past the last) with every limit
        for position, limit in itertools.product(range(-1, n + 3), (None, 0, 1, 2, 5, 500)):
            # THEN the records, the next position, the lag and both ends are moto's own
            assert _answers(fast, shard, str(position), limit) == _answers(moto_own, shard, str(position), limit), \
                (n, position, limit)


def test_a_shard_whose_numbers_are_not_consecutive_is_read_by_motos_walk(
        methods: tuple[dict[str, Any], dict[str, Any]]) -> None:
    # GIVEN a shard with a gap in its numbers (not made by moto today; the fast read must not assume it away)
    moto_own, fast = methods
    shard = _shard(10)
    del shard.records[4]
    # WHEN read from before the gap THEN the answers are moto's own (record 4 skipped, 5 follows 3)
    for position, limit in itertools.product(range(0, 11), (None, 1, 3)):
        assert _answers(fast, shard, str(position), limit) == _answers(moto_own, shard, str(position), limit)
    assert [r.sequence_number for r in fast["get_records"](shard, "2", 3)[0]] == [3, 5, 6]


def test_the_lag_is_read_from_float_and_datetime_arrival_stamps() -> None:
    # GIVEN arrival stamps as moto <= 5.2.5 writes them (epoch seconds) and as 5.2.6 does (datetimes)
    from datetime import datetime, timedelta

    t0 = datetime(2026, 12, 7, 12, 0, 0)
    # WHEN the lag between the newest and a returned record is taken THEN both give the same milliseconds
    assert moto_kinesis.lag_ms(100.25, 100.0) == 250
    assert moto_kinesis.lag_ms(t0 + timedelta(milliseconds=250), t0) == 250


def test_a_shard_that_answers_differently_is_refused_with_one_line_naming_moto() -> None:
    # GIVEN a shard class whose reads do not answer as the patch would (a moto this module does not know)
    class Odd(Shard):  # type: ignore[misc]
        def get_records(self, last_sequence_id: str, limit: int | None) -> tuple[list[Any], int, int]:
            records, last, _ = super().get_records(last_sequence_id, limit)
            return records, last, 7  # a lag computed some other way

    own = {name: getattr(Odd, name) for name in ("get_min_sequence_number", "get_max_sequence_number", "get_records")}
    fast = {"get_min_sequence_number": moto_kinesis._first_sequence_number,
            "get_max_sequence_number": moto_kinesis._last_sequence_number,
            "get_records": moto_kinesis._fast_get_records(own["get_records"])}
    # WHEN probed THEN the difference is named, so install() would keep moto's own methods
    why = moto_kinesis.probe(Odd, own, fast)
    assert why is not None and "!= moto's" in why
