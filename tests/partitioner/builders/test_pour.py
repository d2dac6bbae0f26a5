"""Tests for partitioner.builders.pour: hash-split cells poured into the room that packing leaves."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from geokernel.errors import BuildError
from geokernel.partition_spec.model import HASH_BUCKETS
from partitioner.builders.pour import Liquid, pour, pour_count


def _bin_loads(solids: list[float], result) -> np.ndarray:
    loads = np.zeros(result.bins)
    np.add.at(loads, result.bins_of, solids)
    for s in result.shares:
        loads[s.bin] += s.load
    return loads


def test_hot_cells_top_up_the_workers_regions_leave_short() -> None:
    # GIVEN ten regions of 0.55 (each alone on a worker: no two fit) and two cells of 2.2 and 1.8 caps
    solids = [0.55] * 10
    liquids = [Liquid("0231", 2.2), Liquid("0232", 1.8)]
    # WHEN poured at cap 1
    result = pour(solids, liquids, 1.0)
    # THEN the cells fill the ten rooms of 0.45: 10 workers, the lower bound (whole workers for the cells
    #      first would take 13)
    loads = _bin_loads(solids, result)
    assert result.bins == 10 == int(np.ceil(sum(solids) + 4.0))
    assert loads.max() <= 1.0 + 1e-9
    # AND each cell's shares tile its hash space and add up to its load
    for k, liquid in enumerate(liquids):
        mine = sorted((s for s in result.shares if s.liquid == k), key=lambda s: s.lo)
        assert mine[0].lo == 0 and mine[-1].hi == HASH_BUCKETS
        assert all(a.hi == b.lo for a, b in itertools.pairwise(mine))
        assert sum(s.load for s in mine) == pytest.approx(liquid.load)
    assert pour_count(solids, [2.2, 1.8], 1.0) == 10
    # AND liquid beyond the room gets whole workers of its own: one more cell of 2.5 adds 3 workers
    assert pour_count(solids, [2.2, 1.8, 2.5], 1.0) == 13


def test_a_cell_goes_to_its_neighbours_worker_first_and_that_share_takes_the_lowest_hash_range() -> None:
    # GIVEN two regions of 0.6 on two workers and a cell of 1.3 next to the second region
    solids = [0.6, 0.6]
    result = pour(solids, [Liquid("0231", 1.3, near=(1,))], 1.0, headroom=False)
    # THEN the second region's worker is filled first, with hash range [0, ...); three workers in all
    first = min(result.shares, key=lambda s: s.lo)
    assert first.bin == result.bins_of[1] and first.lo == 0
    assert first.load == pytest.approx(0.4, abs=1e-4)
    assert result.bins == 3 and _bin_loads(solids, result).max() <= 1.0 + 1e-9


def test_a_cell_whose_single_bucket_is_above_the_cap_cannot_be_split() -> None:
    with pytest.raises(BuildError, match="more than 65536 entity-hash shares"):
        pour([], [Liquid("0231", 70_000.0)], 1.0)


def test_shares_leave_headroom_for_their_cell_within_the_workers_the_pouring_needs() -> None:
    # GIVEN two regions of 0.6 and a cell of 1.3 next to the second: 3 workers with 0.5 to spare
    solids = [0.6, 0.6]
    liquid = Liquid("0231", 1.3, near=(1,))
    # WHEN poured with headroom (the default)
    result = pour(solids, [liquid], 1.0)
    # THEN still 3 workers, and every worker holding a share has room for that share to grow by 10 %
    loads = _bin_loads(solids, result)
    assert result.bins == pour(solids, [liquid], 1.0, headroom=False).bins == 3
    for s in result.shares:
        assert 1.0 - loads[s.bin] >= 0.10 * s.load - 1e-9
    # AND the shares keep their real loads, adding up to the cell's
    assert sum(s.load for s in result.shares) == pytest.approx(1.3)


def test_headroom_never_costs_a_worker() -> None:
    # GIVEN ten regions of 0.55 and cells of 2.2 and 1.8 caps: exactly the lower bound of 10 workers, no room spare
    solids = [0.55] * 10
    liquids = [Liquid("0231", 2.2), Liquid("0232", 1.8)]
    # WHEN poured with and without headroom
    loose, tight = pour(solids, liquids, 1.0), pour(solids, liquids, 1.0, headroom=False)
    # THEN both use 10 workers (headroom is only what the workers needed anyway leave free)
    assert loose.bins == tight.bins == 10
    assert _bin_loads(solids, loose).max() <= 1.0 + 1e-9
