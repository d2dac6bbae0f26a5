"""The worker's batch path offline, for the output-equality test: a fixed event set, read as GetRecords returns it,
through the real :class:`~geo_service.serving.batches.BatchProcessor`, out as the enriched lines a flush writes.

The golden files (``serving/data/golden-<transform>.jsonl.gz``) were written by :func:`run_path` on the code before
the batch path (issue #60), so the test compares today's output with that one, byte for byte.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import random
from collections.abc import Iterator, Sequence
from typing import Any

from geo_service.adapters.aws import Clients
from geo_service.pipeline.consumer import Batch, KinesisRecord
from geo_service.pipeline.cost import Calibration, CostTracker
from geo_service.pipeline.transform import GeoTransform
from geo_service.serving.batches import BatchProcessor
from geo_service.serving.slots import Slot
from geokernel.contracts.stream import ShardRange
from geokernel.partition_spec.model import Partition, Spec, Worker, shard_hash_key

#: 2026-12-07T00:00:00Z, epoch ms: every event's time is within a day after it (plausible under the rule).
T0 = 1_796_601_600_000
LONDON = (51.5072, -0.1276)
#: Places around the world (accents in their names, the antimeridian, the poles' neighbourhood, open sea).
WORLD = ((48.8566, 2.3522), (35.6762, 139.6503), (-33.8688, 151.2093), (64.1466, -21.9426), (-17.7134, 178.065),
         (55.7558, 37.6173), (19.4326, -99.1332), (0.0, -160.0), (78.2232, 15.6267), (-54.8019, -68.303))


def events(n: int = 3000, seed: int = 60) -> list[bytes]:
    """``n`` events as a producer sends them (most around London, some around the world), then the edge cases."""
    rng = random.Random(seed)
    out: list[bytes] = []
    for i in range(n):
        lat0, lon0 = LONDON if i % 5 else WORLD[i % len(WORLD)]
        ev: dict[str, Any] = {"event_id": f"e{i:06d}", "entity_id": f"car-{rng.randrange(400)}",
                              "ts": T0 + i * 250 + rng.randrange(200), "lat": round(lat0 + rng.gauss(0, 0.15), 6),
                              "lon": round(lon0 + rng.gauss(0, 0.25), 6)}
        if i % 7 == 0:
            ev["speed"] = round(rng.uniform(0, 40), rng.randrange(1, 9))
        out.append(json.dumps(ev, separators=(",", ":") if i % 2 else (", ", ": ")).encode())
    return out + edge_cases()


def edge_cases() -> list[bytes]:
    """Records whose JSON the two codecs could read or write differently, and records the rules quarantine."""
    base = {"entity_id": "edge", "lat": 51.5, "lon": -0.12}
    docs: list[Any] = [
        {**base, "event_id": "tiny", "ts": T0, "x": 1e-05, "y": -4.769e-05, "z": 0.0001},
        {**base, "event_id": "big-int", "ts": T0 + 1, "n": 123456789012345678901234567890, "m": 2**63, "k": -2**64},
        {**base, "event_id": "huge-float", "ts": T0 + 2, "f": 1e16, "g": 1e22, "h": 1.7976931348623157e308},
        {**base, "event_id": "non-ascii", "ts": T0 + 3, "note": "Hôtel-de-Ville, Zürich, 東京, 😀", "del": "\x7f"},
        {**base, "event_id": "escapes", "ts": T0 + 4, "q": 'a "quote" and \\ a backslash \\x41', "c": "\x01\n\t"},
        {**base, "event_id": 12345, "entity_id": 678, "ts": T0 + 5},
        {**base, "event_id": "ts-seconds", "ts": (T0 + 6000) / 1000},
        {**base, "event_id": "ts-iso", "ts": "2026-12-07T00:00:07.5"},
        {**base, "event_id": "ts-text", "ts": f" {T0 + 8} "},
        {**base, "event_id": "neg-zero", "ts": T0 + 9, "lat": -0.0, "lon": -0.0, "w": -0.0},
        {**base, "event_id": "nested", "ts": T0 + 10, "tags": {"a": [1, 2.5, None, True, {"b": "c"}]}, "e": []},
        {**base, "event_id": "dup-key", "ts": T0 + 11},
        {**base, "event_id": "out-of-range", "ts": T0 + 12, "lat": 91.0},
        {**base, "event_id": "missing", "ts": None},
        {**base, "event_id": "bad-type", "ts": T0 + 14, "lon": "0.1"},
        {**base, "event_id": "old", "ts": 1000},
        [1, 2, 3],
        {**base, "event_id": "short-exponent", "ts": T0 + 15, "x": 1e-07, "y": -4.58e-06, "z": 7.8e-09, "w": 2e-10},
    ]
    raw = [json.dumps(d, ensure_ascii=i % 2 == 0).encode() for i, d in enumerate(docs)]
    raw[11] = raw[11][:-1] + b', "lat": 51.6}'  # a duplicate key: the last value wins, in the first one's place
    raw += [b'{"event_id": "nan", "entity_id": "edge", "ts": %d, "lat": 51.5, "lon": 0.1, "v": NaN}' % (T0 + 20),
            b'{"event_id": "inf", "entity_id": "edge", "ts": %d, "lat": 51.5, "lon": 0.1, "v": 1e400}' % (T0 + 21),
            b'{"event_id": "surrogate", "entity_id": "edge", "ts": %d, "lat": 51.5, "lon": 0.1, "s": "\\ud800"}'
            % (T0 + 22),
            b"not json", b"", b'{"event_id": "trailing", "entity_id": "e", "ts": 1, "lat": 0, "lon": 0} x',
            b'\xef\xbb\xbf{"event_id": "bom", "entity_id": "edge", "ts": %d, "lat": 51.5, "lon": 0.1}' % (T0 + 23),
            b'{"event_id": "latin1", "entity_id": "edge", "ts": 1, "lat": 0, "lon": 0, "s": "\xe9"}']
    return raw


def get_records_body(records: Sequence[bytes], first_seq: int, arrival_s: float) -> bytes:
    """The HTTP body Kinesis answers a GetRecords call with, holding ``records``."""
    return json.dumps({"Records": [{"SequenceNumber": f"{first_seq + i:056d}", "ApproximateArrivalTimestamp":
                                    round(arrival_s + i / 1000, 3), "Data": base64.b64encode(r).decode(),
                                    "PartitionKey": f"pk-{i % 97}"} for i, r in enumerate(records)],
                       "NextShardIterator": "AAAA-next", "MillisBehindLatest": 0}).encode()


def spec() -> Spec:
    """Two workers: ``w0001`` owns a London cell (its other events are strays), ``w0002`` the catch-all."""
    workers = tuple(Worker(id=f"w{i + 1:04d}", load=1.0, hash_key=shard_hash_key(i, 2)) for i in range(2))
    parts = (Partition(id="p0001", worker="w0001", quadkeys=("0313131",), load=1.0),
             Partition(id="p0002", worker="w0002", quadkeys=("",), load=1.0))
    return Spec(version=3, max_load=10.0, partitions=parts, workers=workers, previous_version=None,
                created_at="2026-12-07T00:00:00Z", strategy="test", stream_name="geo-v3")


class _Leases:
    def checkpoint_many(self, checkpoints: Any) -> None:
        pass


class _S3:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def put_object(self, Bucket: str, Key: str, Body: bytes, **_: Any) -> None:
        self.objects[Key] = Body


def slot(transform: GeoTransform) -> Slot:
    """A slot of worker ``w0001`` of :func:`spec` serving ``transform`` (loaded for the whole world)."""
    transform.load_region([""], 1)
    return Slot(leases=_Leases(), spec=spec(), worker_id="w0001", stream="geo-v3",  # type: ignore[arg-type]
                shards=[ShardRange("shardId-000000000000", 0, 2**127, "0")], consumers=(), transform=transform,
                region=("",), places_loaded=0, places_gained=0)


def batches(raw: Sequence[bytes], size: int = 500) -> Iterator[Batch]:
    """``raw`` in batches of ``size`` records as the consumer makes them from GetRecords answers."""
    for start in range(0, len(raw), size):
        chunk = raw[start:start + size]
        recs = tuple(KinesisRecord("shardId-000000000000", f"{start + i:056d}", f"pk-{i % 97}", r,
                                   1_796_601_700.0 + (start + i) / 1000) for i, r in enumerate(chunk))
        yield Batch("shardId-000000000000", recs, 0, False)


def run_path(transform: GeoTransform, raw: Sequence[bytes], size: int = 500) -> list[str]:
    """Every enriched line the real batch path writes for ``raw`` (batches of ``size``), in write order, and the
    quarantined reasons after them (``#reason source``)."""
    clock = itertools.count(1_796_601_800_000)
    s3 = _S3()
    proc = BatchProcessor(Clients(s3=s3, kinesis=None, dynamodb=None), "out", "quar", "costs", 12, "owner-1",
                          wall=lambda: next(clock) / 1000, monotonic=lambda: 0.0)
    tracker = CostTracker(Calibration(0.004), 12, 1e9, clock=lambda: 0.0)
    s = slot(transform)
    lines: list[str] = []
    for b in batches(raw, size):
        proc.process(b, s, tracker)
        lines += s.output.lines
        lines += [f"#{r['reason']} {r['source']}" for r in s.output.bad]
        proc.flush(s)
    assert not math.isnan(sum(tracker.take().cpu_seconds.values()))
    return lines
