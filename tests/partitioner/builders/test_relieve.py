"""Tests for partitioner.builders.relieve: a finer piece over the cap gives up one listed tile."""

from __future__ import annotations

import numpy as np
import pytest

from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Spec
from partitioner.builders import build_with_report
from partitioner.builders.relieve import Leaves, relieve
from partitioner.load.counts import counts_from_pairs

ROWS = [("0231", 290.0), ("02310", 45.0), ("02311", 40.0), ("02312", 105.0), ("02313", 100.0),
        ("023120", 30.0), ("023121", 25.0), ("023122", 25.0), ("023123", 25.0), ("0230", 30.0), ("0232", 20.0)]


@pytest.fixture(scope="module")
def live() -> Spec:
    return build_with_report(counts_from_pairs(ROWS), 100.0).spec


def _relieve(spec: Spec, quadkeys: set[str], excess: float, cap: float = 100.0):
    index = SpecIndex(spec)
    i = next(k for k, p in enumerate(spec.partitions) if set(p.quadkeys) == quadkeys)
    leaves = counts_from_pairs(ROWS).leaves()
    return relieve(index, i, spec.partitions[i], Leaves(leaves.x, leaves.y, leaves.z, np.asarray(leaves.weight)),
                   excess, cap)


@pytest.mark.parametrize("excess, given", [(2.0, "02311"), (40.0, "02311"), (41.0, "02310")])
def test_the_least_loaded_tile_that_covers_the_excess_is_given_up(live: Spec, excess: float, given: str) -> None:
    # GIVEN the piece listing 02310 (45) and 02311 (40)
    # WHEN it must shed `excess`
    relief = _relieve(live, {"02310", "02311"}, excess)
    # THEN it gives up the least-loaded tile that covers it, and keeps the other with the rest of the load
    assert relief is not None
    assert relief.given.quadkeys == (given,)
    assert relief.given.load == pytest.approx(dict(ROWS)[given])
    assert relief.kept.quadkeys == tuple(q for q in ("02310", "02311") if q != given)
    assert relief.kept.load + relief.given.load == pytest.approx(85.0)


def test_no_relief_when_no_single_tile_covers_the_excess_or_the_piece_has_one_tile(live: Spec) -> None:
    # GIVEN the same piece, and a piece of one tile
    # WHEN the excess is more than either tile holds, or the piece cannot give up a tile and keep one
    # THEN there is no relief (the repair splits the cell again instead)
    assert _relieve(live, {"02310", "02311"}, 50.0) is None
    assert _relieve(live, {"023123"}, 1.0) is None


def test_a_tile_hotter_than_the_cap_is_never_given_up(live: Spec) -> None:
    # GIVEN the piece listing 02310 (45) and 02311 (40)
    # WHEN it must shed 41 (only 02310 covers that) under a cap of 44, and 2 under a cap of 42
    # THEN 02310 is not given up (it would be a region no worker holds whole): no relief for 41 (the repair splits
    #      the cell again), and 02311 for 2 as before
    assert _relieve(live, {"02310", "02311"}, 41.0, cap=44.0) is None
    relief = _relieve(live, {"02310", "02311"}, 2.0, cap=42.0)
    assert relief is not None and relief.given.quadkeys == ("02311",)
