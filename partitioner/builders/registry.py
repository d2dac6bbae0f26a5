"""The build strategies by name: the one place a strategy name (``--strategy``, ``Spec.strategy``) becomes a builder.

=============  ===========================================================================================
``compact``    the default: compact regions packed onto about ``ceil(total / max_load)`` workers, sticky to
               the live spec (:mod:`partitioner.builders.compact`)
``seed``       the greedy baseline the project started from (:mod:`partitioner.builders.seed`)
=============  ===========================================================================================

The CLI offers :data:`STRATEGIES`; :func:`partitioner.builders.build_with_report` (what the CLI, the
simulator and the partitioner Lambda call) looks its ``strategy`` up with :func:`builder`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from geokernel.errors import BuildError
from partitioner.builders.compact import CompactBuilder
from partitioner.builders.protocol import Builder
from partitioner.builders.seed import SeedBuilder

BUILDERS: Mapping[str, Builder] = MappingProxyType({b.name: b for b in (CompactBuilder(), SeedBuilder())})
STRATEGIES: tuple[str, ...] = tuple(BUILDERS)  # the default first


def builder(strategy: str) -> Builder:
    """Return the builder of ``strategy``; raise :class:`BuildError` naming it and the known ones if there is none."""
    if strategy not in STRATEGIES:
        raise BuildError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    return BUILDERS[strategy]
