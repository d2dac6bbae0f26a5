"""lambdas.runtime.pacing: a backlog's puts reach no shard faster than the routers' share of its write quota."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lambdas.router.handler import pacer_for
from lambdas.runtime.kinesis import PutEntry, chunk_entries
from lambdas.runtime.pacing import (
    BURST_S,
    CATCHUP_AGE_S,
    MAX_WAIT_S,
    PACED_SHARE,
    SHARD_RECORDS_PER_S,
    PaceBudget,
    Pacer,
    oldest_arrival,
)


class FakeTime:
    """A clock that moves only when slept on, recording each put (time, target, records)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sent: list[tuple[float, str]] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        assert s > 0
        self.now += s


def put_paced(t: FakeTime, pacer: Pacer, targets: list[str], size: int = 200, call_s: float = 0.01) -> int:
    """Put one record per target entry through ``pacer`` as GeoStreams.put_records does; return the calls made."""
    entries = [PutEntry(b"x" * size, "e", k) for k in targets]
    sizes = [size + 1] * len(entries)
    calls = 0
    for chunk in pacer.chunks(targets, sizes, chunk_entries(entries)):
        pacer.wait(targets, sizes, chunk)
        t.sent += [(t.now, targets[i]) for i in chunk]
        t.now += call_s  # the call itself takes a little time
        calls += 1
    return calls


def busiest_second(sent: list[tuple[float, str]]) -> dict[str, int]:
    """Per target, the most records sent in any window of one second (sliding, not only whole seconds)."""
    out: dict[str, int] = defaultdict(int)
    by: dict[str, list[float]] = defaultdict(list)
    for at, k in sent:
        by[k].append(at)
    for k, times in by.items():
        times.sort()
        j = 0
        for i, at in enumerate(times):
            while times[j] <= at - 1.0:
                j += 1
            out[k] = max(out[k], i - j + 1)
    return out


def test_the_budget_splits_the_paced_share_between_the_routers() -> None:
    # GIVEN 2 and 10 routers THEN each may put its part of 45 % of a shard, burst included
    for n in (2, 10):
        b = PaceBudget.shared(n)
        assert b.records_per_s * (1 + BURST_S) * n == pytest.approx(SHARD_RECORDS_PER_S * PACED_SHARE)
    assert PACED_SHARE < 0.5  # the budget's 2x margin, with room for fresh batches beside it
    with pytest.raises(ValueError, match="routers must be >= 1, got 0"):
        PaceBudget.shared(0)


def test_a_backlog_for_one_shard_goes_out_at_the_routers_share_not_at_once() -> None:
    # GIVEN one router of two, and a 500-record batch all for one shard (what warm-up's backlog put in one call)
    t = FakeTime()
    pacer = Pacer(PaceBudget.shared(2), clock=t.clock, sleep=t.sleep)
    # WHEN it is put paced
    put_paced(t, pacer, ["s/1"] * 500)
    # THEN no one-second window holds more than the share of one router (225 records of the shard's 1,000)
    limit = SHARD_RECORDS_PER_S * PACED_SHARE / 2
    assert busiest_second(t.sent)["s/1"] <= limit
    # AND it took about 500 / rate seconds, all of it asleep
    assert pacer.waited_s == pytest.approx(500 / pacer.budget.records_per_s, rel=0.05)


def test_back_to_back_invocations_stay_within_the_share_together() -> None:
    # GIVEN five invocations of one ingest shard, one after another (each a fresh pacer: a new environment)
    t = FakeTime()
    for _ in range(5):
        put_paced(t, Pacer(PaceBudget.shared(2), clock=t.clock, sleep=t.sleep), ["s/1"] * 300 + ["s/2"] * 20)
    # THEN no window of one second holds more than one router's share, also across invocations
    assert max(busiest_second(t.sent).values()) <= SHARD_RECORDS_PER_S * PACED_SHARE / 2


def test_a_batch_spread_over_many_shards_hardly_waits() -> None:
    # GIVEN 500 records over 250 shards (two each), 100 routers sharing every shard
    t = FakeTime()
    pacer = Pacer(PaceBudget.shared(100), clock=t.clock, sleep=t.sleep)
    put_paced(t, pacer, [f"s/{i % 250}" for i in range(500)])
    # THEN each shard got its two records within about two of its tokens, not 500 records' time
    assert pacer.waited_s < 2 / pacer.budget.records_per_s + 0.1


def test_the_wait_is_bounded_then_the_rest_goes_unpaced() -> None:
    # GIVEN a budget so small that pacing 500 records would take far longer than the Lambda's timeout
    t = FakeTime()
    pacer = Pacer(PaceBudget(records_per_s=4.0, bytes_per_s=1e6), clock=t.clock, sleep=t.sleep)
    # WHEN put
    put_paced(t, pacer, ["s/1"] * 500)
    # THEN the invocation slept at most MAX_WAIT_S and every record was still put
    assert pacer.waited_s <= MAX_WAIT_S
    assert len(t.sent) == 500


def test_bytes_pace_large_records_too() -> None:
    # GIVEN 40 records of 100 kB for one shard (4 MB: four seconds of a shard's 1 MiB/s)
    t = FakeTime()
    pacer = Pacer(PaceBudget.shared(1), clock=t.clock, sleep=t.sleep)
    put_paced(t, pacer, ["s/1"] * 40, size=100_000)
    # THEN no second carries more than the paced share of the shard's bytes
    most = busiest_second(t.sent)["s/1"] * 100_001
    assert most <= 1024 * 1024 * PACED_SHARE


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=600), min_size=1, max_size=4),
       routers=st.integers(1, 4))
def test_any_sequence_of_batches_keeps_every_shard_within_the_share(batches: list[list[int]], routers: int) -> None:
    # GIVEN any batches (targets among four shards) put one after another by fresh pacers
    t = FakeTime()
    for batch in batches:
        put_paced(t, Pacer(PaceBudget.shared(routers), clock=t.clock, sleep=t.sleep), [f"s/{k}" for k in batch])
    # THEN every one-second window holds at most the router's share of each shard (+1: a bucket under one record)
    limit = SHARD_RECORDS_PER_S * PACED_SHARE / routers
    assert all(n <= limit + 1 for n in busiest_second(t.sent).values())
    assert len(t.sent) == sum(len(b) for b in batches)


def kinesis_event(arrivals: list[float], stream: str = "georebal-ingest") -> dict[str, object]:
    return {"Records": [{"kinesis": {"approximateArrivalTimestamp": a, "sequenceNumber": str(i)},
                         "eventID": f"shardId-000000000000:{i}",
                         "eventSourceARN": f"arn:aws:kinesis:us-east-1:1:stream/{stream}"}
                        for i, a in enumerate(arrivals)]}


def test_only_a_batch_that_is_behind_is_paced() -> None:
    # GIVEN a fresh batch (arrived within the last second) and one from a backlog (a minute old)
    now = 2_000_000_000.0
    asked: list[str] = []

    def routers(stream: str) -> int:
        asked.append(stream)
        return 2

    fresh = kinesis_event([now - 0.8, now - 0.2])
    behind = kinesis_event([now - 60.0, now - 59.0])
    # THEN the fresh one goes out unpaced (no shard listing either) and the old one gets a pacer for two routers
    assert pacer_for(fresh, routers, now) is None and asked == []
    pacer = pacer_for(behind, routers, now)
    assert pacer is not None and pacer.budget == PaceBudget.shared(2) and asked == ["georebal-ingest"]
    assert oldest_arrival(behind) == now - 60.0
    assert pacer_for(kinesis_event([now - CATCHUP_AGE_S + 0.1]), routers, now) is None
    assert pacer_for({"Records": []}, routers, now) is None
