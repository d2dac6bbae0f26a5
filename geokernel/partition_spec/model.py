"""The partition spec: what the partitioner publishes and everything else deploys.

A spec is an immutable, versioned JSON document (``format`` =
:data:`SPEC_FORMAT`, JSON Schema in ``geokernel/partition_spec/spec.schema.json``)::

    {"format": "geo-rebalancer.spec/1", "version": 7, "previous_version": 6,
     "created_at": "2026-11-21T10:00:00Z", "max_load": 2500.0, "strategy": "compact",
     "stream_name": "georebal-geo-v7",
     "workers": [{"id": "w0001", "load": 2410.0, "hash_key": "17014118346046923173168730371588410572"}],
     "partitions": [{"id": "p0001", "worker": "w0001", "load": 2410.0, "quadkeys": ["0231", "02310"]},
                    {"id": "p0002", "worker": "w0001", "load": 0.0, "quadkeys": [""]},
                    {"id": "p0003", "worker": "w0002", "load": 2400.0, "quadkeys": ["0231013"],
                     "hash_range": [0, 32768]}],
     "source": {"total_load": 7210.0, "zoom": 14}}

Rules (checked by :func:`geokernel.partition_spec.rules.validate`; read back with :mod:`geokernel.partition_spec.parse`):

* A point belongs to the partition listing the **longest prefix** of its quadkey, so
  an ancestor covers its descendants and a finer cell listed elsewhere carves a hole.
* Exactly one partition lists ``""`` (the root): the **catch-all**, owner of every
  place no other partition lists. So the spec always covers the whole world. The root
  may be split by entity hash like a hot cell (below) when more load is expected in
  unlisted places than one worker holds; each share is then a catch-all.
* A quadkey may be listed by more than one partition only when it is a **hot cell
  split by entity hash**: each such partition lists that one quadkey and a
  ``hash_range`` ``[lo, hi)`` of entity buckets (:func:`entity_bucket`); the ranges
  of one cell are disjoint and together cover ``[0, HASH_BUCKETS)``. A partition's
  ``share`` of the cell is ``(hi - lo) / HASH_BUCKETS``.
* Every partition names a worker; every worker's ``load`` is the sum of its
  partitions' loads and is at most ``max_load``. Each worker reads one shard of
  the version's geo stream: ``hash_key`` is the ExplicitHashKey that lands there.
* A worker whose cap needs more than one shard's write rate owns ``k`` consecutive
  shards: ``hash_keys`` lists one ExplicitHashKey per shard (the first is ``hash_key``;
  written only when ``k > 1``, so one-shard specs read unchanged). The router picks one
  of them per entity (:func:`geokernel.partition_spec.shards.entity_shard`), so an entity's events stay on one shard.
  No key is listed by two workers. The geo stream has :attr:`Spec.shard_count` shards.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from pathlib import Path
from types import MappingProxyType
from typing import Any

from geokernel.errors import SpecError

SPEC_FORMAT = "geo-rebalancer.spec/1"
HASH_BUCKETS = 65536
HASH_KEY_SPACE = 1 << 128
LOAD_TOLERANCE = 1e-6  # relative slack for float sums when checking caps and totals
CATCH_ALL_QUADKEY = ""


def entity_bucket(entity_id: str) -> int:
    """Return the entity's bucket in [0, HASH_BUCKETS): the first two bytes of its MD5.

    The router, the workers and the partitioner all use this one function to decide
    which share of a split hot cell an entity belongs to.
    """
    return int.from_bytes(hashlib.md5(entity_id.encode("utf-8")).digest()[:2], "big")


def shard_hash_key(index: int, count: int) -> str:
    """Return the ExplicitHashKey (decimal string) in the middle of shard ``index`` of ``count``.

    Kinesis splits the 128-bit hash key space evenly when a stream is created with
    ``count`` shards; the midpoint of each slice is safely inside that shard.
    """
    if count < 1 or not 0 <= index < count:
        raise SpecError(f"shard index {index!r} is not in [0, {count!r})")
    return str((2 * index + 1) * HASH_KEY_SPACE // (2 * count))


@dataclass(frozen=True)
class Partition:
    """One contiguous region (or one share of a split hot cell) and the worker that owns it."""

    id: str
    worker: str
    quadkeys: tuple[str, ...]
    load: float
    hash_range: tuple[int, int] | None = None

    @property
    def is_catch_all(self) -> bool:
        return CATCH_ALL_QUADKEY in self.quadkeys

    @property
    def share(self) -> float:
        """Fraction of its cell's entities this partition owns (1.0 unless split)."""
        if self.hash_range is None:
            return 1.0
        return (self.hash_range[1] - self.hash_range[0]) / HASH_BUCKETS


@dataclass(frozen=True)
class Worker:
    """One geo worker (one ECS task) and the shard(s) of the geo stream it reads.

    Notes
    -----
    ``hash_keys`` is empty for a one-shard worker (``hash_key`` is its key); a worker owning
    ``k > 1`` shards lists ``k`` keys, the first equal to ``hash_key``. :attr:`shard_keys`
    gives the keys in both cases.
    """

    id: str
    load: float
    hash_key: str
    hash_keys: tuple[str, ...] = ()

    @property
    def shard_keys(self) -> tuple[str, ...]:
        """One ExplicitHashKey per shard this worker owns (``(hash_key,)`` for one shard)."""
        return self.hash_keys or (self.hash_key,)


@dataclass(frozen=True)
class Spec:
    """An immutable partition spec; see the module docstring for the rules.

    Notes
    -----
    ``source`` (free-form provenance: counts, total load, lower bound) is kept as a
    read-only copy (nested objects read-only too, arrays as tuples); :meth:`to_dict`
    gives it back as plain dicts and lists. It takes no part in the hash, so specs can
    be dict keys and set members.
    """

    version: int
    max_load: float
    partitions: tuple[Partition, ...]
    workers: tuple[Worker, ...]
    previous_version: int | None = None
    created_at: str = ""
    strategy: str = ""
    stream_name: str | None = None
    source: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        # a read-only copy: nobody holding this spec can change what another holder reads
        object.__setattr__(self, "source", _freeze(self.source))

    # -- derived views -----------------------------------------------------
    @property
    def catch_all(self) -> Partition:
        """The partition listing the root; the share holding bucket 0 when the root is split by entity hash."""
        for p in sorted(self.partitions, key=lambda p: (p.hash_range or (0, 0))[0]):
            if p.is_catch_all:
                return p
        raise SpecError(f"spec v{self.version!r} has no catch-all partition (none lists the root quadkey '')")

    @property
    def shard_count(self) -> int:
        """Shards of the version's geo stream: the sum of the workers' shards."""
        return sum(len(w.shard_keys) for w in self.workers)

    @property
    def total_load(self) -> float:
        return float(sum(p.load for p in self.partitions))

    def partition(self, pid: str) -> Partition:
        for p in self.partitions:
            if p.id == pid:
                return p
        raise SpecError(f"spec v{self.version!r} has no partition {pid!r}")

    def worker(self, wid: str) -> Worker:
        for w in self.workers:
            if w.id == wid:
                return w
        raise SpecError(f"spec v{self.version!r} has no worker {wid!r}")

    def partitions_of(self, wid: str) -> tuple[Partition, ...]:
        return tuple(p for p in self.partitions if p.worker == wid)

    def replace(self, **changes: Any) -> Spec:
        """Return a copy with fields changed (a spec is never mutated)."""
        return dataclasses.replace(self, **changes)

    # -- serialisation -----------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        for p in self.partitions:
            d: dict[str, Any] = {"id": p.id, "worker": p.worker, "load": p.load, "quadkeys": list(p.quadkeys)}
            if p.hash_range is not None:
                d["hash_range"] = list(p.hash_range)
            parts.append(d)
        return {
            "format": SPEC_FORMAT,
            "version": self.version,
            "previous_version": self.previous_version,
            "created_at": self.created_at,
            "max_load": self.max_load,
            "strategy": self.strategy,
            "stream_name": self.stream_name,
            "workers": [_worker_dict(w) for w in self.workers],
            "partitions": parts,
            "source": _thaw(self.source),
        }

    def to_json(self, indent: int | None = 1) -> str:
        """The spec as JSON text; with ``indent`` 1 (the default) one line per worker and per partition.

        Notes
        -----
        The default layout is written without per-quadkey Python work (a partition's quadkeys are
        joined in one call), so a spec of millions of quadkeys writes in a fraction of a second.
        ``json.loads`` of it equals :meth:`to_dict`. Other ``indent`` values use :func:`json.dumps`.
        """
        if indent != 1:
            return json.dumps(self.to_dict(), indent=indent, sort_keys=False)
        return _spec_text(self)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n", encoding="utf-8")


def _spec_text(spec: Spec) -> str:
    """The JSON text of a spec: header fields one per line, then one line per worker and per partition."""
    head = {"format": SPEC_FORMAT, "version": spec.version, "previous_version": spec.previous_version,
            "created_at": spec.created_at, "max_load": spec.max_load, "strategy": spec.strategy,
            "stream_name": spec.stream_name}
    lines = ["{", *(f" {_enc(k)}: {json.dumps(v)}," for k, v in head.items()), ' "workers": [']
    lines += [f'  {{"id": {_enc(w.id)}, "load": {_json_number(w.load)}, "hash_key": {_enc(w.hash_key)}'
              + (f', "hash_keys": [{", ".join(map(_enc, w.hash_keys))}]' if w.hash_keys else "") + "},"
              for w in spec.workers]
    _drop_last_comma(lines, len(spec.workers))
    lines += [" ],", ' "partitions": [']
    lines += [_partition_line(p) + "," for p in spec.partitions]
    _drop_last_comma(lines, len(spec.partitions))
    lines += [" ],", f' "source": {json.dumps(_thaw(spec.source))}', "}"]
    return "\n".join(lines)


def _worker_dict(w: Worker) -> dict[str, Any]:
    d: dict[str, Any] = {"id": w.id, "load": w.load, "hash_key": w.hash_key}
    if w.hash_keys:
        d["hash_keys"] = list(w.hash_keys)
    return d


def _drop_last_comma(lines: list[str], added: int) -> None:
    if added:
        lines[-1] = lines[-1][:-1]


def _partition_line(p: Partition) -> str:
    joined = '", "'.join(p.quadkeys)
    qks = f'"{joined}"' if p.quadkeys and _PLAIN.fullmatch(joined) else ", ".join(map(_enc, p.quadkeys))
    hr = f', "hash_range": [{p.hash_range[0]}, {p.hash_range[1]}]' if p.hash_range is not None else ""
    return f'  {{"id": {_enc(p.id)}, "worker": {_enc(p.worker)}, "load": {_json_number(p.load)}, "quadkeys": [{qks}]{hr}}}'


def _json_number(v: float) -> str:
    return float.__repr__(v) if math.isfinite(v) else json.dumps(v)


_enc = encode_basestring
_PLAIN = re.compile(r'[0-3", ]*')  # quadkeys joined by '", "': nothing to escape


def _freeze(value: Any) -> Any:
    """A read-only copy of a JSON-like value: mappings as read-only views of copies, lists as tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    """The plain JSON form (dicts and lists) of a value :func:`_freeze` made read-only."""
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value
