"""Tests for partitioner.control.unseen: the Good-Turing share of load outside every listed square."""

from __future__ import annotations

import numpy as np
import pytest
from spec_factory import qk

from partitioner.builders.assemble import SpecHeader, assemble
from partitioner.builders.region import Placement, Region
from partitioner.control.levels import CellLevels
from partitioner.control.unseen import unseen_share

ZOOM = 10
HEADER = SpecHeader(version=1, max_load=100.0, previous_version=None, created_at="2026-01-01T00:00:00Z",
                    strategy="compact", stream_name=None, source={})


def _levels(events: dict[tuple[int, int], float]) -> CellLevels:
    codes = np.array([(x << ZOOM) | y for x, y in events], dtype=np.int64)
    return CellLevels.empty(ZOOM).update(codes, np.array(list(events.values())), alpha=0.5, jump_z=3.0)


def _spec(*squares: str):
    return assemble(Placement(tuple(Region((q,), 1.0) for q in squares), (0,) * len(squares)), HEADER)


def test_squares_holding_one_single_event_cell_are_the_estimate():
    # GIVEN 10 events: a lone event in each of two squares, 8 events in a third square (two cells of 4)
    lv = _levels({(0, 0): 1.0, (40, 40): 1.0, (100, 100): 4.0, (101, 100): 4.0})
    spec = _spec(qk(0, 0, ZOOM), qk(40, 40, ZOOM), qk(50, 50, ZOOM - 1))
    # THEN two of the ten events were the only one of their square: 20 %
    assert unseen_share(lv, spec) == pytest.approx(0.2)


def test_a_single_event_cell_that_shares_its_square_is_not_counted():
    # GIVEN two one-event cells inside one square (zoom 8 holds 4x4 grid cells)
    lv = _levels({(0, 0): 1.0, (1, 1): 1.0, (100, 100): 8.0})
    # THEN the square holds two events: without either one it would still be listed
    assert unseen_share(lv, _spec(qk(0, 0, ZOOM - 2), qk(100, 100, ZOOM))) == 0.0
    # AND listed as two cells of their own, each is a lone event: 2 of 10
    assert unseen_share(lv, _spec(qk(0, 0, ZOOM), qk(1, 1, ZOOM), qk(100, 100, ZOOM))) == pytest.approx(0.2)


def test_each_cell_counts_in_the_deepest_square_that_holds_it():
    # GIVEN a one-event cell listed on its own inside a coarser square that also holds a busy cell
    lv = _levels({(0, 0): 1.0, (3, 3): 9.0})
    spec = _spec(qk(0, 0, ZOOM), qk(0, 0, ZOOM - 2))
    # THEN the deep square holds the lone event, the coarse one the other nine
    assert unseen_share(lv, spec) == pytest.approx(0.1)


def test_nothing_seen_or_no_single_event_cell_is_no_unseen_load():
    assert unseen_share(CellLevels.empty(ZOOM), _spec(qk(0, 0, ZOOM))) == 0.0
    assert unseen_share(_levels({(0, 0): 2.0}), _spec(qk(0, 0, ZOOM))) == 0.0
    assert unseen_share(_levels({(0, 0): 0.5}), _spec(qk(0, 0, ZOOM))) == 0.0  # weighted, not whole events
