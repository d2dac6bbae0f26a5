"""The rules a spec keeps (see :mod:`geokernel.partition_spec.model`): :func:`validate` lists every broken one, :func:`check` raises.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from geokernel.errors import SpecError
from geokernel.partition_spec.model import HASH_BUCKETS, LOAD_TOLERANCE, Partition, Spec


def validate(spec: Spec) -> list[str]:
    """Return every rule the spec breaks (empty list when valid).

    Checks: version and max_load, unique ids, worker references, exactly one
    catch-all (or its shares split by hash range), no quadkey listed twice except as a hot cell split by disjoint hash
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
    catch_alls = [p.id for p in spec.partitions if p.is_catch_all and p.hash_range is None]
    split_root = any(p.is_catch_all and p.hash_range is not None for p in spec.partitions)
    if len(catch_alls) != 1 and not (split_root and not catch_alls):
        problems.append(f"exactly one partition must list the root quadkey '' (catch-all), or several split by "
                        f"hash range, found {catch_alls!r}")
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
        if len(p.quadkeys) != 1:
            problems.append(f"split partition {p.id!r} must list exactly one quadkey, got {p.quadkeys!r}")
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
