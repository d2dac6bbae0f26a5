"""local.report.swap_checks: per-entity order across flips and never two readers of one cell, on hand-made records."""

from __future__ import annotations

from local.output import Processed
from local.report.swap_checks import flip_check, order_check, reader_check

A, B = "120220011", "120220013"  # two zoom-9 cells (the checks bucket points into zoom-12 cells)


def rec(event: str, entity: str, version: int, worker: str, owner: str, ms: int, cell: str = A) -> Processed:
    return Processed(event, entity, version, worker, owner, ms, cell)


def test_an_entity_read_from_the_new_stream_before_the_old_one_is_done_breaks_order() -> None:
    # GIVEN car-1's last v1 record processed after its first v2 record, and car-2 in order
    records = [rec("e1", "car-1", 1, "w1", "p1", 100), rec("e2", "car-1", 2, "w2", "p2", 90),
               rec("e3", "car-2", 1, "w1", "p1", 50), rec("e4", "car-2", 2, "w1", "p1", 60)]
    # WHEN checked THEN one violation, naming car-1
    got = order_check(records)
    assert (got.checked, got.violations) == (2, 1) and "car-1" in got.sample[0]
    # AND in order it passes
    assert order_check([rec("e1", "car-1", 1, "w1", "p1", 80), rec("e2", "car-1", 2, "w2", "p2", 90)]).ok


def test_an_order_violation_says_whether_the_old_record_was_put_after_the_new_one() -> None:
    # GIVEN car-1's v1 record sent 300 ms after its v2 record (a router behind the flip), processed after it
    late = Processed("e1", "car-1", 1, "w1", "p1", 100, A, sent_ms=1_300)
    first = Processed("e2", "car-1", 2, "w2", "p2", 90, A, sent_ms=1_000)
    # WHEN checked THEN the violation names the send times' order
    assert order_check([late, first]).sample == (
        "car-1: v1 record e1 processed at 100 ms, after v2 record e2 at 90 ms; sent +0.300 s after it "
        "(put on the old stream after the new one)",)
    # AND a late copy of an event processed earlier says so
    copy = Processed("e1", "car-1", 1, "w1", "p3", 120, A, sent_ms=900)
    assert order_check([Processed("e1", "car-1", 1, "w1", "p1", 50, A, sent_ms=900), copy, first]).sample == (
        "car-1: v1 record e1 processed at 120 ms, after v2 record e2 at 90 ms; sent -0.100 s after it; a copy, "
        "first processed at 50 ms",)


def test_a_record_routed_to_the_old_stream_after_the_new_one_is_a_flip_back() -> None:
    # GIVEN car-1's record sent at 1,300 ms went to v1 after its record sent at 1,000 ms went to v2
    back = [Processed("e1", "car-1", 2, "w2", "p2", 90, A, sent_ms=1_000),
            Processed("e2", "car-1", 1, "w1", "p1", 100, A, sent_ms=1_300)]
    # WHEN checked THEN one flip back, naming both events
    got = flip_check(back)
    assert (got.checked, got.violations) == (1, 1) and "e2 sent at 1300 ms went to v1, after e1" in got.sample[0]
    # BUT a copy of an event that also went to v2 (a batch retried after the flip) is no flip back
    retried = [Processed("e0", "car-1", 2, "w2", "p2", 90, A, sent_ms=900), *back[:1],
               Processed("e1", "car-1", 1, "w1", "p1", 80, A, sent_ms=1_000)]
    assert flip_check(retried).ok and flip_check(back[:1]).ok


def test_two_processes_reading_one_cell_at_once_are_caught_only_where_it_matters() -> None:
    # GIVEN cell A read by p1 (v1) until 100 ms and by p2 (v2) from 90 ms: a cross-version overlap
    overlap = [rec("e1", "c1", 1, "w1", "p1", 0), rec("e2", "c2", 1, "w1", "p1", 100),
               rec("e3", "c3", 2, "w2", "p2", 90)]
    assert reader_check(overlap).violations == 1
    # AND a takeover within one slot of one version that overlaps is caught too
    assert reader_check([rec("e1", "c1", 1, "w1", "p1", 0), rec("e2", "c1", 1, "w1", "p1", 100),
                         rec("e3", "c1", 1, "w1", "p3", 50)]).violations == 1
    # BUT two slots of one version sharing a cell (hash split or finer squares) and a carried process are fine
    fine = [rec("e1", "c1", 1, "w1", "p1", 0), rec("e2", "c2", 1, "w1", "p1", 100), rec("e3", "c3", 1, "w2", "p2", 50),
            rec("e4", "c4", 2, "w1", "p1", 60), rec("e5", "c5", 2, "w9", "p9", 200, cell=B)]
    assert reader_check(fine).ok and reader_check(fine).checked == 2
