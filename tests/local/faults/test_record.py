"""local.faults.record: the fault table's row and its "events lost or doubled" column."""

from __future__ import annotations

from local.faults.record import FaultRecord, events_column


def test_events_column_counts_extra_copies_written_while_the_fault_was_open() -> None:
    copies = [("a", 10), ("a", 50), ("b", 20), ("c", 30), ("c", 200)]
    assert events_column(2, copies, 40, 100) == "lost 2 (whole run), doubled 1 written while open (2 in the run)"
    assert "doubled 0" in events_column(0, copies, 0, 5)


def test_a_broken_promise_is_in_the_fault_table_row() -> None:
    r = FaultRecord("snapshot-corrupt", injected_at=1.0, detected_at=2.0, recovered_at=3.0, deadline_s=10.0,
                    did="rejected", problems=["bad-rows snapshot k was not rejected: published"])
    row = r.row(0.0)
    assert "did: rejected" in row and "BROKEN: bad-rows snapshot k was not rejected" in row
