"""KPL aggregated records for the local producer (``--kpl``), made by the real encoder ``aws_kinesis_agg``.

The router and the Spark job de-aggregate them (:mod:`geokernel.contracts.kpl`); the local replay sends its events
packed this way so the whole loop sees what a Java producer using the KPL sends.

**Per shard, as the KPL does.** The KPL packs together only user records whose partition keys hash to the same shard
and expects the aggregated record to land there
(https://docs.aws.amazon.com/streams/latest/dev/service-managed-pk-kpl-aggregation.html). So an entity's events
(partition key ``entity_id``) stay on one ingest shard, in order, which the router's state handoff relies on
(:mod:`lambdas.router.stateful`). Packing records of several shards into one (keyed by the first) would scatter an
entity's events over shards.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from geokernel.contracts.stream import ShardRange, shard_for_key


def kpl_aggregate(records: list[tuple[bytes, str]], per_record: int,
                  shards: Sequence[ShardRange] = ()) -> list[tuple[bytes, str]]:
    """``(data, partition key)`` records packed ``per_record`` to a KPL aggregated record by ``aws_kinesis_agg``.

    With ``shards`` (the stream's ``ListShards``), only records bound for the same shard share an aggregated record,
    in their order; without, consecutive records are packed whatever their shard. Each aggregated record's
    partition key is its first user record's (what the encoder and the KPL use); a chunk larger than the encoder's
    1 MB limit comes out as more records.
    """
    if not shards:
        return _pack(records, per_record)
    by_shard: dict[str, list[tuple[bytes, str]]] = {}
    for record in records:
        by_shard.setdefault(shard_for_key(shards, record[1]).shard_id, []).append(record)
    return [packed for group in by_shard.values() for packed in _pack(group, per_record)]


def _pack(records: list[tuple[bytes, str]], per_record: int) -> list[tuple[bytes, str]]:
    """Consecutive records of ``records``, ``per_record`` to an aggregated record."""
    from aws_kinesis_agg.aggregator import RecordAggregator  # type: ignore[import-untyped]

    out: list[tuple[bytes, str]] = []
    for start in range(0, len(records), per_record):
        agg = RecordAggregator()
        for data, key in records[start:start + per_record]:
            full = agg.add_user_record(key, data)
            if full is not None:
                pk, _, blob = full.get_contents()
                out.append((bytes(blob), str(pk)))
        rest = agg.clear_and_get()
        if rest is not None:
            pk, _, blob = rest.get_contents()
            out.append((bytes(blob), str(pk)))
    return out


def corrupt_kpl_record(seed: int) -> bytes:
    """A KPL aggregated record (two events) with its last MD5 byte flipped: quarantined whole, never routed."""
    events = [json.dumps({"event_id": f"kpl-corrupt{seed}-{i}", "entity_id": "ent-bad"}).encode() for i in range(2)]
    ((blob, _),) = kpl_aggregate([(e, "ent-bad") for e in events], 2)
    return blob[:-1] + bytes([blob[-1] ^ 0x01])
