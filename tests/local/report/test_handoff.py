"""The STATE HANDOFF section (local.report.handoff): stats from worker logs, and calls per event at steady state."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import pytest

from geo_service.adapters.logs import formatter
from local.report.handoff import (
    SETTLE_S,
    HandoffStats,
    RouterLedgerCalls,
    events_in,
    quiet_spans,
    read_stats,
    section,
    steady,
    swap_spans,
)

T0 = 1_800_000_000.0


def line(event: str, at: float, **fields: object) -> str:
    """A worker's log line at epoch ``at``, as its formatter writes it (geo_service.adapters.logs)."""
    record = logging.makeLogRecord({"msg": event, "levelname": "INFO", "levelno": logging.INFO, "created": at,
                                    "msecs": at % 1 * 1000, **fields})
    return formatter().format(record)


def test_worker_lines_give_totals_and_calls_over_time(tmp_path: Path) -> None:
    # GIVEN a worker that logged a handoff step and then two call samples, and a router that made 3 ledger calls
    log = tmp_path / "worker-1.log"
    log.write_text("\n".join([
        line("state_handoff", T0 + 1, handed=2, waits_s=[0.1, 0.3], answered_s=[0.4, 1.2], crossings=1,
             calls={"BatchWriteItem": 1}, owner="w1"),
        line("state_calls", T0 + 5, calls={"BatchWriteItem": 1, "PutObject": 2}, owner="w1"),
        line("state_calls", T0 + 9, calls={"BatchWriteItem": 1, "PutObject": 6}, owner="w1"),
        "not json", line("state_not_handed_over", T0 + 9.5, owner="w1"),
        json.dumps({"_aws": {"CloudWatchMetrics": []}, "state_calls": [1.0]})]))  # an EMF line is no log line
    router = RouterLedgerCalls(2, 1, Counter({int(T0) + 2: 2, int(T0) + 8: 1}))
    # WHEN the log is read
    stats = read_stats([log], router)
    # THEN the totals are the last line's calls plus the router's, and calls in a span count what was made in it
    assert (stats.handed, stats.crossings, stats.lost, stats.waits) == (2, 1, 1, [0.1, 0.3])
    assert stats.answers == [0.4, 1.2]
    assert stats.calls == {"BatchWriteItem": 1, "PutObject": 6} and stats.total_calls == 10
    assert stats.calls_in((T0, T0 + 5)) == 3 + 2  # worker samples 0 -> 3, router second T0+2
    assert stats.calls_in((T0 + 5, T0 + 10)) == 4 + 1
    assert stats.calls_in((T0 - 10, T0)) == 0


def test_swaps_are_cut_out_of_the_live_replay() -> None:
    # GIVEN a first deployment (not a swap), a swap to v2 and a deploy of v3 that never flipped
    flips = [(None, 1, T0), (1, 2, T0 + 50)]
    spans = swap_spans(flips, {1: T0 - 30, 2: T0 + 40, 3: T0 + 90}, {1: T0 + 60}, end=T0 + 120)
    # THEN the swap runs from its deploy's start to the old version's drain plus the settling time
    assert spans == [(T0 + 40, T0 + 60 + SETTLE_S), (T0 + 90, T0 + 120 + SETTLE_S)]
    # AND the quiet parts of a live replay are what the swaps leave
    assert quiet_spans((T0, T0 + 100), spans) == [(T0, T0 + 40), (T0 + 60 + SETTLE_S, T0 + 90)]
    assert quiet_spans((T0, T0 + 10), [(T0 - 5, T0 + 20)]) == []


def test_events_are_counted_by_the_part_of_each_second_inside_a_span() -> None:
    sent = {10: 100, 11: 100, 12: 50}
    assert events_in(sent, [(10.0, 12.0)]) == 200
    assert events_in(sent, [(10.5, 11.5)]) == pytest.approx(100)
    assert events_in(sent, [(9.0, 10.0), (12.0, 20.0)]) == 50


def test_the_section_prints_the_steady_state_rate_against_its_target() -> None:
    # GIVEN 40 quiet seconds of 100 events each and 12 calls in them
    stats = HandoffStats(handed=1, waits=[0.2], calls={"PutObject": 30}, router_seconds=Counter({5: 12}))
    quiet = steady(stats, (0.0, 60.0), [(40.0, 60.0)], {t: 100 for t in range(60)})
    # WHEN the section is written THEN it names both rates
    text = "\n".join(section(stats, 6000, quiet))
    assert "= 0.0050 per event sent (6000)" in text
    assert "no swap in progress: 40 s of 60 s live): 12 calls for 4000 events = 0.0030 per event" in text
    # AND how much of it is the router ledger's, whose share falls with the rate (12 ledger calls at 100 events/s)
    assert "of them the router ledger's GET and PUT per invocation 0.0030 per event at 100 events/s" in text
    assert section(HandoffStats(), 100, quiet) == []


def test_the_section_prints_the_old_slots_part_of_the_wait_only_when_markers_were_answered() -> None:
    # GIVEN states received after waits, and the old slots' times from each marker's put to its state written
    stats = HandoffStats(handed=4, waits=[0.2, 0.4, 2.5], answers=[0.3, 0.5, 0.6, 2.1])
    # WHEN the section is written THEN it prints their quantiles next to the waits
    text = "\n".join(section(stats, 100))
    assert "the old slot's part, from the router's marker to the state written (4 markers): p50 0.50s, p99 2.10s" \
        in text
    # AND a run whose lines carry no marker times prints no such line
    assert "old slot's part" not in "\n".join(section(HandoffStats(handed=1, waits=[0.2]), 100))
