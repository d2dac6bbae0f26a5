"""What every builder takes and gives: a checked :class:`BuildRequest`, a :class:`BuildReport`, the :class:`Builder` protocol.

:func:`partitioner.builders.build_with_report` checks the arguments, looks the strategy up in
:mod:`partitioner.builders.registry` and hands the builder one request; the builder only builds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from geokernel.partition_spec.model import Spec
from partitioner.builders.assemble import SpecHeader
from partitioner.load.counts import Counts, Grid


@dataclass(frozen=True, slots=True)
class BuildRequest:
    """One build with its arguments checked: the load, its grid, the cap to pack to and the spec's header."""

    counts: Counts
    grid: Grid  # ``counts.grid()``
    cap: float  # ``max_load x fill``: what regions and workers are packed to (the spec states ``max_load``)
    lower_bound: int  # workers the load needs at ``cap``
    previous: Spec | None  # the live spec, for builders that keep ids sticky to it
    header: SpecHeader

    @property
    def fill(self) -> float:
        """The share of ``max_load`` (``header.max_load``) that ``cap`` is."""
        return self.cap / self.header.max_load


@dataclass(frozen=True)
class BuildReport:
    """What a build did, beside the spec itself."""

    spec: Spec
    strategy: str
    lower_bound: int
    hot_cells: int
    hash_split_cells: int
    mode: str  # "fresh", "fresh+matched" or "repair"
    notes: tuple[str, ...] = field(default_factory=tuple)
    problems: tuple[str, ...] = field(default_factory=tuple)


class Builder(Protocol):
    """A build strategy: the spec of a checked request, and how it was made."""

    @property
    def name(self) -> str:
        """The strategy's name (``--strategy``, ``Spec.strategy``)."""
        ...

    def build(self, request: BuildRequest) -> BuildReport:
        """Build the spec of ``request``; raise :class:`geokernel.errors.BuildError` if it cannot be built."""
        ...
