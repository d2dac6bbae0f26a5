"""Reading a spec: from decoded JSON, JSON text or a file, checking its structure and naming the bad field.

Only the structure is checked here (types, required fields, quadkey digits); the rules a spec must
keep (one catch-all, caps, disjoint hash ranges) are :func:`geokernel.partition_spec.rules.validate`'s.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from geokernel.errors import InvalidQuadkeyError, SpecError
from geokernel.geo.tiles import MAX_ZOOM, parse_quadkey
from geokernel.partition_spec.model import SPEC_FORMAT, Partition, Spec, Worker


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
