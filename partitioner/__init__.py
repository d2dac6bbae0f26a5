"""Geo Rebalancer partitioner: quadkey math, spec model, spec building, metrics, policy, event rules.

A pure library (NumPy only): no AWS SDK, no Spark. See ``docs/CONTRACTS.md``.

Sub-packages in layers, bottom-up; a module imports only from its own layer and those below it
(``scripts/check_structure.py`` checks it):

==============  ===========================================================================================
``contracts``   the records the parts of the system exchange (names, keys, codecs)
``errors``      the exception base, :class:`PartitionerError`, and its kinds
``geo``         tiles and quadkeys, adjacency, region shapes, polygons
``spec``        the spec (model, reading, rules), the point -> partition index, shards, region geometry
``load``        events, load per quadkey (reading, cost), the lower bound, loads per worker, forecast
``builders``    the build strategies behind one protocol and a registry (``compact``, ``seed``)
``control``     the rebalance policies and the control step the Lambda and the simulator run
``aws_budget``  every AWS call counted against its quota
``simulate``    the closed-loop simulator
``output``      metrics, spec comparison, tables, GeoJSON and maps
``commands``    the sub-commands of ``python -m partitioner`` (:mod:`partitioner.cli` on top)
==============  ===========================================================================================
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
from partitioner.spec.index import SpecIndex
from partitioner.spec.model import Partition, Spec, Worker, entity_bucket
from partitioner.spec.parse import load_spec, spec_from_json
from partitioner.spec.rules import check, validate

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
