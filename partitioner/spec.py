"""The partition spec: what the partitioner publishes and everything else deploys.

A spec is an immutable, versioned JSON document (``format`` =
:data:`SPEC_FORMAT`, JSON Schema in ``partitioner/spec.schema.json``)::

    {"format": "geo-rebalancer.spec/1", "version": 7, "previous_version": 6,
     "created_at": "2026-11-21T10:00:00Z", "max_load": 2500.0, "strategy": "compact",
     "stream_name": "georebal-geo-v7",
     "workers": [{"id": "w0001", "load": 2410.0, "hash_key": "17014118346046923173168730371588410572"}],
     "partitions": [{"id": "p0001", "worker": "w0001", "load": 2410.0, "quadkeys": ["0231", "02310"]},
                    {"id": "p0002", "worker": "w0001", "load": 0.0, "quadkeys": [""]},
                    {"id": "p0003", "worker": "w0002", "load": 2400.0, "quadkeys": ["0231013"],
                     "hash_range": [0, 32768]}],
     "source": {"total_load": 7210.0, "zoom": 14}}

Rules (checked by :func:`validate`):

* A point belongs to the partition listing the **longest prefix** of its quadkey, so
  an ancestor covers its descendants and a finer cell listed elsewhere carves a hole.
* Exactly one partition lists ``""`` (the root): the **catch-all**, owner of every
  place no other partition lists. So the spec always covers the whole world.
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
  of them per entity (:func:`partitioner.shards.entity_shard`), so an entity's events stay on one shard.
  No key is listed by two workers. The geo stream has :attr:`Spec.shard_count` shards.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from pathlib import Path
from types import MappingProxyType
from typing import Any

from partitioner.errors import InvalidQuadkeyError, SpecError
from partitioner.tiles import MAX_ZOOM, parse_quadkey

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
        for p in self.partitions:
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


def spec_from_dict(data: Any, where: str = "spec") -> Spec:
    """Parse a spec from decoded JSON, raising SpecError that names the bad field.

    Only the structure is checked here; call :func:`validate` for the rules.
    """
    if not isinstance(data, dict):
        raise SpecError(f"{where}: expected a JSON object, got {type(data).__name__}")
    if data.get("format") != SPEC_FORMAT:
        raise SpecError(f"{where}: 'format' must be {SPEC_FORMAT!r}, got {data.get('format')!r}")
    version = _int(data, "version", where)
    prev = data.get("previous_version")
    if prev is not None and (isinstance(prev, bool) or not isinstance(prev, int)):
        raise SpecError(f"{where}: 'previous_version' must be an integer or null, got {prev!r}")
    workers = tuple(
        Worker(id=_str(w, "id", f"{where}.workers[{i}]"), load=_num(w, "load", f"{where}.workers[{i}]"),
               hash_key=_str(w, "hash_key", f"{where}.workers[{i}]"), hash_keys=_keys(w, f"{where}.workers[{i}]"))
        for i, w in enumerate(_list(data, "workers", where))
    )
    parts = []
    for i, p in enumerate(_list(data, "partitions", where)):
        pw = f"{where}.partitions[{i}]"
        quadkeys = _quadkeys(_list(p, "quadkeys", pw), pw)
        hr = p.get("hash_range")
        hash_range = None
        if hr is not None:
            if not (isinstance(hr, list) and len(hr) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                                  for v in hr)):
                raise SpecError(f"{pw}.hash_range must be [lo, hi] integers, got {hr!r}")
            hash_range = (hr[0], hr[1])
        parts.append(Partition(id=_str(p, "id", pw), worker=_str(p, "worker", pw), quadkeys=quadkeys,
                               load=_num(p, "load", pw), hash_range=hash_range))
    stream = data.get("stream_name")
    if stream is not None and not isinstance(stream, str):
        raise SpecError(f"{where}: 'stream_name' must be a string or null, got {stream!r}")
    source = data.get("source") or {}
    if not isinstance(source, dict):
        raise SpecError(f"{where}: 'source' must be an object, got {source!r}")
    return Spec(version=version, max_load=_num(data, "max_load", where), partitions=tuple(parts),
                workers=workers, previous_version=prev, created_at=str(data.get("created_at") or ""),
                strategy=str(data.get("strategy") or ""), stream_name=stream, source=source)


def _keys(w: Any, where: str) -> tuple[str, ...]:
    """A worker's optional ``hash_keys``: absent, or a list of non-empty strings."""
    v = w.get("hash_keys")
    if v is None:
        return ()
    if not isinstance(v, list) or not all(isinstance(k, str) and k for k in v):
        raise SpecError(f"{where}: 'hash_keys' must be a list of non-empty strings, got {v!r}")
    return tuple(v)


_NOT_DIGITS = str.maketrans("", "", "0123")


def _quadkeys(qks: list[Any], where: str) -> tuple[str, ...]:
    """The quadkeys of one partition, checked in one pass (each one only to name a bad one)."""
    try:
        ok = not "".join(qks).translate(_NOT_DIGITS) and max(map(len, qks), default=0) <= MAX_ZOOM
    except TypeError:
        ok = False
    if ok:
        return tuple(qks)
    try:
        return tuple(parse_quadkey(q, f"{where}.quadkeys[{j}]") for j, q in enumerate(qks))
    except InvalidQuadkeyError as exc:
        raise SpecError(str(exc)) from exc


def spec_from_json(text: str | bytes, where: str = "spec") -> Spec:
    """Parse and structurally check a spec from JSON text."""
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SpecError(f"{where}: not valid JSON ({exc})") from exc
    return spec_from_dict(data, where)


def load_spec(path: str | Path) -> Spec:
    """Read a spec file; errors name the path."""
    p = Path(path)
    try:
        text = p.read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read spec file {str(p)!r}: {exc.strerror}") from exc
    return spec_from_json(text, where=str(p))


def validate(spec: Spec) -> list[str]:
    """Return every rule the spec breaks (empty list when valid).

    Checks: version and max_load, unique ids, worker references, exactly one
    catch-all, no quadkey listed twice except as a hot cell split by disjoint hash
    ranges that cover all buckets, finite non-negative loads, worker loads equal to
    the sum of their partitions and within ``max_load``.
    """
    problems: list[str] = []
    if spec.version < 1:
        problems.append(f"version must be >= 1, got {spec.version!r}")
    if spec.previous_version is not None and spec.previous_version >= spec.version:
        problems.append(f"previous_version {spec.previous_version!r} must be lower than version {spec.version!r}")
    if not (math.isfinite(spec.max_load) and spec.max_load > 0):
        problems.append(f"max_load must be a positive number, got {spec.max_load!r}")
    problems += _duplicates("partition id", (p.id for p in spec.partitions))
    problems += _duplicates("worker id", (w.id for w in spec.workers))
    worker_ids = {w.id for w in spec.workers}
    sums: dict[str, float] = defaultdict(float)
    for p in spec.partitions:
        if p.worker not in worker_ids:
            problems.append(f"partition {p.id!r} names unknown worker {p.worker!r}")
        if not (math.isfinite(p.load) and p.load >= 0):
            problems.append(f"partition {p.id!r} has invalid load {p.load!r}")
        if not p.quadkeys:
            problems.append(f"partition {p.id!r} lists no quadkeys")
        sums[p.worker] += p.load
    for w in spec.workers:
        if w.id not in sums:
            problems.append(f"worker {w.id!r} has no partitions")
        if not math.isclose(w.load, sums.get(w.id, 0.0), rel_tol=LOAD_TOLERANCE, abs_tol=1e-9):
            problems.append(f"worker {w.id!r} load {w.load!r} != sum of its partitions {sums.get(w.id, 0.0)!r}")
        if w.load > spec.max_load * (1 + LOAD_TOLERANCE):
            problems.append(f"worker {w.id!r} load {w.load!r} exceeds max_load {spec.max_load!r}")
        if w.hash_keys and w.hash_keys[0] != w.hash_key:
            problems.append(f"worker {w.id!r} hash_keys {list(w.hash_keys)!r} must start with hash_key {w.hash_key!r}")
    problems += _duplicates("hash key", (k for w in spec.workers for k in w.shard_keys))
    catch_alls = [p.id for p in spec.partitions if p.is_catch_all]
    if len(catch_alls) != 1:
        problems.append(f"exactly one partition must list the root quadkey '' (catch-all), found {catch_alls!r}")
    problems += _overlaps(spec)
    return problems


def check(spec: Spec) -> Spec:
    """Return ``spec`` if :func:`validate` finds nothing, else raise SpecError listing the problems."""
    problems = validate(spec)
    if problems:
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise SpecError(f"spec v{spec.version!r} is invalid: {shown}")
    return spec


def _overlaps(spec: Spec) -> list[str]:
    problems: list[str] = []
    plain: list[str] = []
    split: dict[str, list[Partition]] = defaultdict(list)
    for p in spec.partitions:
        if p.hash_range is None:
            plain.extend(p.quadkeys)
            continue
        if len(p.quadkeys) != 1 or p.is_catch_all:
            problems.append(f"split partition {p.id!r} must list exactly one non-root quadkey, got {p.quadkeys!r}")
            continue
        lo, hi = p.hash_range
        if not 0 <= lo < hi <= HASH_BUCKETS:
            problems.append(f"partition {p.id!r} hash_range {list(p.hash_range)!r} not within [0, {HASH_BUCKETS}]")
            continue
        split[p.quadkeys[0]].append(p)
    plain_set = set(plain)
    if len(plain_set) != len(plain):
        owners: dict[str, list[str]] = defaultdict(list)
        for p in spec.partitions:
            if p.hash_range is None:
                for q in p.quadkeys:
                    owners[q].append(p.id)
        problems += [f"quadkey {q!r} is listed more than once, by {ids!r}" for q, ids in owners.items() if len(ids) > 1]
    for q, ps in split.items():
        ids = [p.id for p in ps]
        if q in plain_set:
            problems.append(f"split cell {q!r} ({ids!r}) is also listed by a partition without a hash range")
        edge = 0
        for lo, hi in sorted(p.hash_range for p in ps if p.hash_range is not None):
            if lo != edge:
                problems.append(f"hash ranges of split cell {q!r} ({ids!r}) leave a gap or overlap at {edge!r}")
                break
            edge = hi
        else:
            if edge != HASH_BUCKETS:
                problems.append(f"hash ranges of split cell {q!r} ({ids!r}) end at {edge!r}, not {HASH_BUCKETS}")
    return problems


def _duplicates(what: str, values: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    dup: list[str] = []
    for v in values:
        if v in seen:
            dup.append(f"duplicate {what} {v!r}")
        seen.add(v)
    return dup


def _list(d: Any, key: str, where: str) -> list[Any]:
    v = d.get(key) if isinstance(d, dict) else None
    if not isinstance(v, list):
        raise SpecError(f"{where}: {key!r} must be a list, got {v!r}")
    return v


def _str(d: Any, key: str, where: str) -> str:
    v = d.get(key) if isinstance(d, dict) else None
    if not isinstance(v, str) or not v:
        raise SpecError(f"{where}: {key!r} must be a non-empty string, got {v!r}")
    return v


def _int(d: Any, key: str, where: str) -> int:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise SpecError(f"{where}: {key!r} must be an integer, got {v!r}")
    return v


def _num(d: Any, key: str, where: str) -> float:
    v = d.get(key) if isinstance(d, dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise SpecError(f"{where}: {key!r} must be a finite number, got {v!r}")
    return float(v)
