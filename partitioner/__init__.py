"""Geo Rebalancer partitioner: quadkey math, spec model, spec building, metrics, policy, event rules.

A pure library (NumPy only): no AWS SDK, no Spark. See ``docs/CONTRACTS.md``.
"""

__version__ = "0.1.0"  # the project version in pyproject.toml (a test keeps them equal)

from partitioner.errors import (
    BuildError,
    CountsError,
    InvalidCoordinateError,
    InvalidQuadkeyError,
    InvalidTileError,
    PartitionerError,
    PolicyError,
    SpecError,
)
from partitioner.index import SpecIndex
from partitioner.spec import Partition, Spec, Worker, check, entity_bucket, load_spec, spec_from_json, validate

__all__ = [
    "BuildError",
    "CountsError",
    "InvalidCoordinateError",
    "InvalidQuadkeyError",
    "InvalidTileError",
    "Partition",
    "PartitionerError",
    "PolicyError",
    "Spec",
    "SpecError",
    "SpecIndex",
    "Worker",
    "__version__",
    "check",
    "entity_bucket",
    "load_spec",
    "spec_from_json",
    "validate",
]
