"""Geo Rebalancer partitioner: builds contiguous geographic partitions under a cap and runs the control loop.

A pure library (NumPy only): no AWS SDK, no Spark. It builds on the kernel every image ships (:mod:`geokernel`:
the contracts, quadkey geometry, the partition spec model, the AWS quota model, the event rules and the exception
base); only the partitioner Lambda, the CDK app (policy validation), the local loop and the benches import it.
See ``docs/ARCHITECTURE.md``.

Sub-packages in layers, bottom-up; a module imports only from its own layer and those below it
(``scripts/check_structure.py`` checks it):

==============  ===========================================================================================
``load``        load per quadkey (reading, cost), the lower bound, loads per worker
``builders``    the build strategies behind one protocol and a registry (``compact``, ``seed``)
``control``     the rebalance policies, the control step the Lambda and the simulator run, and its forecast
``simulate``    the closed-loop simulator
``output``      metrics, spec comparison, tables, GeoJSON and maps
``commands``    the sub-commands of ``python -m partitioner`` (:mod:`partitioner.cli` on top)
==============  ===========================================================================================

Everything is imported from its module (``from geokernel.partition_spec.model import Spec``); the package root
holds only the version.
"""

__version__ = "0.2.0"  # the project version in pyproject.toml (a test keeps them equal)
