"""Where the router sends an event: its partition, worker, geo stream, shard and ExplicitHashKey, and who holds the
worker's slot now.

Computed by the router's own code: :class:`lambdas.router.routing.RoutingTable` (its :class:`SpecIndex` lookup,
the worker's hash keys and :func:`~geokernel.partition_spec.shards.entity_shard` for a worker of several shards),
built from a spec file or, like the router, from the active spec (:class:`~lambdas.router.routing.ActiveSpecCache`
over the control table and the specs bucket). The shard is the one of the version's stream manifest
(``streams/v<version>.json``, what the workers read) holding the key, else of ``ListShards``; for a spec file, the
shard of a stream created with ``shard_count`` shards (Kinesis splits the key space evenly). The lease is the slot's
item ``v<version>#<worker>`` of the leases table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from botocore.exceptions import ClientError

from geokernel.contracts.events import EVENT_LAT_LIMIT, EVENT_LON_LIMIT
from geokernel.contracts.lease import LEASE_KEY_ATTR, LeaseRecord
from geokernel.contracts.slot import SlotId
from geokernel.contracts.stream import ShardRange, StreamManifest, stream_manifest_key
from geokernel.geo.tiles import Tile, quadkey, tiles_xy
from geokernel.partition_spec.index import LOOKUP_ZOOM
from geokernel.partition_spec.model import HASH_KEY_SPACE, Partition, Spec
from georebal.deployment import client_error
from georebal.errors import DeploymentError, InputError
from georebal.ingest import list_shards
from lambdas.router.routing import RoutingTable


def check_point(lat: float, lon: float) -> None:
    """:class:`InputError` naming a point outside the events' limits (those the router quarantines)."""
    if not -EVENT_LAT_LIMIT <= lat <= EVENT_LAT_LIMIT:
        raise InputError(f"--lat {lat!r}: outside [-{EVENT_LAT_LIMIT}, {EVENT_LAT_LIMIT}] (the events' limits; the "
                         f"router quarantines such an event as lat_out_of_range)")
    if not -EVENT_LON_LIMIT <= lon <= EVENT_LON_LIMIT:
        raise InputError(f"--lon {lon!r}: outside [-{EVENT_LON_LIMIT:g}, {EVENT_LON_LIMIT:g}] (the events' limits; "
                         f"the router quarantines such an event as lon_out_of_range)")


@dataclass(frozen=True)
class Shard:
    """The geo stream shard a key lands on: its id, its index among the stream's shards and how it was found."""

    shard_id: str
    index: int
    count: int
    found_by: str  # "stream manifest" | "ListShards" | "computed"


@dataclass(frozen=True)
class Lease:
    """The slot's lease item now (``owner`` None: released or never claimed)."""

    key: str
    owner: str | None
    expires_at: float
    ready: bool
    drained: bool
    released: bool

    @classmethod
    def of(cls, key: str, record: LeaseRecord) -> Lease:
        return cls(key, record.owner, record.expires_at, record.ready, record.drained, record.released)


@dataclass(frozen=True)
class Location:
    """Where an event at ``lat``/``lon`` of ``entity`` goes under spec ``version``."""

    lat: float
    lon: float
    entity: str | None
    version: int
    spec_source: str
    partition: str
    cell: str  # the longest quadkey of the partition holding the point ("" the catch-all)
    split: bool  # a share of a cell split by entity hash
    worker: str
    slot: str
    stream: str
    hash_key: str
    worker_shards: int
    shard: Shard | None  # None: the worker owns several shards and no entity was given
    lease: Lease | None = None
    lease_read: bool = False


def locate(table: RoutingTable, lat: float, lon: float, entity: str | None, source: str) -> Location:
    """Locate one point the way :meth:`RoutingTable.targets_for` routes it (raises :class:`InputError` for a point in
    a cell split by entity hash without ``entity``: the worker depends on it)."""
    check_point(lat, lon)
    spec = table.spec
    lons, lats, ids = np.array([lon]), np.array([lat]), [entity or ""]
    partition = spec.partitions[int(table.index.locate(lons, lats, ids)[0])]
    target = table.targets_for(lons, lats, ids)[0]
    worker = spec.worker(partition.worker)
    if partition.hash_range is not None and entity is None:
        cells = set(partition.quadkeys)
        shares = [p.id for p in spec.partitions if p.hash_range is not None and cells & set(p.quadkeys)]
        raise InputError(f"--lat {lat!r} --lon {lon!r}: cell {cell_of(partition, lat, lon)!r} of spec "
                         f"v{spec.version} is split by entity over {len(shares)} partitions ({', '.join(shares)}): "
                         f"give --entity ID")
    several = len(worker.shard_keys) > 1
    return Location(lat=lat, lon=lon, entity=entity, version=spec.version, spec_source=source, partition=partition.id,
                    cell=cell_of(partition, lat, lon), split=partition.hash_range is not None, worker=worker.id,
                    slot=target.label, stream=target.stream, hash_key=target.hash_key,
                    worker_shards=len(worker.shard_keys), shard=None if several and entity is None else
                    computed_shard(spec, target.hash_key))


def cell_of(partition: Partition, lat: float, lon: float) -> str:
    """The longest quadkey of ``partition`` that holds the point (``""``: none but the root, the catch-all)."""
    x, y = tiles_xy(np.array([lon]), np.array([lat]), LOOKUP_ZOOM)
    key = quadkey(Tile(int(x[0]), int(y[0]), LOOKUP_ZOOM))
    return max((q for q in partition.quadkeys if key.startswith(q)), key=len, default="")


def computed_shard(spec: Spec, hash_key: str) -> Shard:
    """The shard of a stream created with ``spec.shard_count`` shards holding ``hash_key`` (an even split)."""
    n = spec.shard_count
    i = int(hash_key) * n // HASH_KEY_SPACE
    return Shard(f"shardId-{i:012d}", i, n, "computed")


def listed_shard(shards: Sequence[ShardRange], hash_key: str, found_by: str) -> Shard | None:
    """The open shard of ``shards`` holding ``hash_key`` (None: none), its index among the open ones."""
    ordered = sorted((s for s in shards if not s.closed), key=lambda s: s.starting_hash_key)
    key = int(hash_key)
    return next((Shard(s.shard_id, i, len(ordered), found_by) for i, s in enumerate(ordered) if s.holds(key)), None)


def deployed_shard(s3: Any, kinesis: Any, bucket: str, location: Location) -> Shard | None:
    """The shard of the deployed geo stream: from its manifest in the specs bucket, else ``ListShards``."""
    key = stream_manifest_key(location.version)
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        manifest = StreamManifest.from_json(body, f"s3://{bucket}/{key}")
        return listed_shard(manifest.shards, location.hash_key, f"stream manifest s3://{bucket}/{key}")
    except ClientError as exc:
        if client_error(exc).split(":")[0] not in ("NoSuchKey", "404", "NotFound", "AccessDenied"):
            raise DeploymentError(f"cannot read the stream manifest s3://{bucket}/{key} "
                                  f"({client_error(exc)})") from None
    except ValueError as exc:
        raise DeploymentError(str(exc)) from None
    return listed_shard(list_shards(kinesis, location.stream), location.hash_key, "ListShards")


def read_lease(dynamodb: Any, table: str, version: int, worker: str) -> Lease | None:
    """The lease item of slot ``v<version>#<worker>`` (strongly consistent; None: no item)."""
    key = str(SlotId(version, worker))
    try:
        item = dynamodb.get_item(TableName=table, Key={LEASE_KEY_ATTR: {"S": key}}, ConsistentRead=True).get("Item")
    except ClientError as exc:
        raise DeploymentError(f"leases table {table!r}: cannot read {key!r} ({client_error(exc)})") from None
    return None if item is None else Lease.of(key, LeaseRecord.from_raw(item))
