"""Tests for partitioner.builders.registry: strategy names to builders, one lookup, one error."""

from __future__ import annotations

import pytest

from geokernel.errors import BuildError
from partitioner.builders import build_with_report
from partitioner.builders.protocol import Builder, BuildReport, BuildRequest
from partitioner.builders.registry import BUILDERS, STRATEGIES, builder
from partitioner.load.counts import counts_from_pairs


def test_every_strategy_has_a_builder_under_its_own_name_the_default_first() -> None:
    # GIVEN the registry
    # THEN it offers compact (the default, first) and seed, each under the name its builder gives
    assert STRATEGIES == ("compact", "seed")
    assert all(BUILDERS[name].name == name for name in STRATEGIES)


def test_an_unknown_strategy_is_refused_naming_it_and_the_known_ones() -> None:
    # WHEN a strategy no builder has is looked up
    # THEN the error names the bad value and every strategy there is
    with pytest.raises(BuildError, match=r"unknown strategy 'greedy'; choose one of compact, seed"):
        builder("greedy")


def test_the_build_goes_to_the_builder_the_registry_names(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a registry whose seed builder records what it is asked
    asked: list[BuildRequest] = []
    real = BUILDERS["seed"]

    class Recording:
        name = "seed"

        def build(self, request: BuildRequest) -> BuildReport:
            asked.append(request)
            return real.build(request)

    recording: Builder = Recording()
    monkeypatch.setattr("partitioner.builders.registry.BUILDERS", {**BUILDERS, "seed": recording})
    # WHEN a spec is built with the seed strategy
    report = build_with_report(counts_from_pairs([("120", 3.0), ("121", 4.0)]), 10.0, strategy="seed",
                               created_at="2026-01-01T00:00:00Z")
    # THEN that builder built it, from one checked request at the packing cap
    assert len(asked) == 1 and asked[0].cap == 10.0 and asked[0].lower_bound == 1
    assert report.strategy == "seed" and report.spec.strategy == "seed"
