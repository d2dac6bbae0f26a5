"""Tests for partitioner.builders.ids: the one id allocator and ids kept from the previous spec."""

from __future__ import annotations

from spec_factory import make_spec, qk

from partitioner.builders.ids import IdAllocator, fill_blanks, match_ids, next_number
from partitioner.builders.region import Placement, Region


def test_fresh_ids_count_up_from_the_highest_number_in_use() -> None:
    # GIVEN ids in use with gaps, another prefix and a hand-written name
    new = IdAllocator("p", ["p0003", "w0007", "p0001", "main", ""])
    # WHEN three fresh ids are drawn
    # THEN they continue above the highest number of any id (gaps are never reused)
    assert [new(), new(), new()] == ["p0008", "p0009", "p0010"]
    assert next_number(["main", "x"]) == 1


def test_fresh_ids_never_repeat_one_already_taken() -> None:
    # GIVEN an allocator that has handed out ids
    new = IdAllocator("w")
    drawn = new.take(3)
    # THEN they are distinct, in order
    assert drawn == ("w0001", "w0002", "w0003")
    assert new() == "w0004"


def test_blanks_are_filled_in_order_above_every_id_kept_or_taken() -> None:
    # GIVEN kept ids, blanks, and ids the previous spec used
    ids = fill_blanks(["p0002", "", "p0005", ""], "p", ["p0009", "p0004"])
    # THEN blanks get fresh ids above both the kept and the previous ones
    assert ids == ("p0002", "p0010", "p0005", "p0011")


def test_fresh_regions_take_the_previous_ids_they_share_the_most_load_with() -> None:
    # GIVEN a previous spec of two partitions on two workers
    a = [qk(100, 100, 10), qk(101, 100, 10)]
    b = [qk(200, 100, 10), qk(201, 100, 10)]
    previous = make_spec([("p0004", "w0002", a, 2.0), ("p0007", "w0005", b, 2.0)], 10.0)
    # AND a fresh placement: b's cells on worker 0, a's cells plus a new place on worker 1, and a new region
    placement = Placement((Region(tuple(b), 2.0), Region((*a, qk(102, 100, 10)), 3.0),
                           Region((qk(300, 300, 10),), 1.0)), (0, 1, 1))
    # WHEN ids are matched
    ids = match_ids(previous, placement)
    # THEN regions and workers keep the previous ids they overlap; the new region gets a fresh id (above the
    #      catch-all p9999 of the previous spec)
    assert ids.partitions == ("p0007", "p0004", "p10000")
    assert ids.workers == ("w0005", "w0002")
