"""Shared set-up of the partitioner tests.

The test modules import their helpers as ``spec_factory`` (the kernel tests' spec builder, in
``tests/geokernel/``) and ``build_data`` whatever pytest's import mode (``--import-mode=importlib`` does not put
test directories on ``sys.path``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "geokernel"))

from build_data import metro_counts, sparse_counts
from spec_factory import block, make_counts, make_spec

from geokernel.partition_spec.model import Spec
from partitioner.load.counts import Counts


@pytest.fixture(scope="session")
def metro() -> Counts:
    """A dense metro area (three centres, 120k points) at zoom 15."""
    return metro_counts()


@pytest.fixture(scope="session")
def sparse() -> Counts:
    """Hundreds of isolated clusters worldwide at zoom 12."""
    return sparse_counts()


@pytest.fixture
def two_squares() -> tuple[Spec, Counts]:
    # GIVEN two 2x2 squares side by side on two workers, 10 load per cell
    a, b = block(500, 502, 400, 402), block(502, 504, 400, 402)
    spec = make_spec([("p0001", "w0001", a, 40.0), ("p0002", "w0002", b, 40.0)], max_load=50.0)
    counts = make_counts({q: 10.0 for q in a + b})
    return spec, counts
