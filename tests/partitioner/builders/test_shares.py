"""Tests for partitioner.builders.shares: how a build note states a load against max_load and the cap."""

from __future__ import annotations

import pytest

from geokernel.errors import BuildError
from partitioner.builders.shares import of_max_load


@pytest.mark.parametrize("load, cap, fill, digits, says", [
    (400.0, 400.0, 1.0, 0, "100% of max_load"),
    (320.0, 320.0, 0.8, 0, "80% of max_load, 100% of the cap (fill 80%)"),
    (414.0, 160.0, 0.8, 1, "207.0% of max_load, 258.8% of the cap (fill 80%)"),
])
def test_a_load_is_stated_as_its_share_of_max_load_and_below_fill_1_of_the_cap(load: float, cap: float, fill: float,
                                                                               digits: int, says: str) -> None:
    # GIVEN a load, the cap a build packs to and its fill (max_load = cap / fill)
    # WHEN a note states the load
    # THEN it gives the share of max_load itself, and the share of the cap only where the fill is below 1
    assert of_max_load(load, cap, fill, digits) == says


@pytest.mark.parametrize("cap, fill, bad", [(0.0, 1.0, "cap"), (float("nan"), 1.0, "cap"), (100.0, 0.0, "fill"),
                                            (100.0, 1.5, "fill")])
def test_a_bad_cap_or_fill_is_refused_naming_the_value(cap: float, fill: float, bad: str) -> None:
    # GIVEN a cap that is not positive or a fill outside (0, 1]
    # WHEN a note would state a load against it
    # THEN a BuildError names the bad value
    with pytest.raises(BuildError, match=f"{bad} must be"):
        of_max_load(1.0, cap, fill)
