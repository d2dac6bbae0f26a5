"""S3 adapters: immutable specs (and the geo streams' shard maps), plain object reads, cost reports, quarantine.

Keys follow ``docs/CONTRACTS.md``: specs at :func:`~geokernel.contracts.spec_key`, worker cost reports under
``costs/v<version>/<worker_id>/``, quarantined records under ``quarantine/<source>/<day>/``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from geokernel.contracts.cost import CostReportRecord, cost_prefix, parse_cost_key
from geokernel.contracts.errors import ContractError
from geokernel.contracts.quarantine import lambda_quarantine_key
from geokernel.contracts.spec_pointer import spec_key
from geokernel.contracts.stream import StreamManifest, stream_manifest_key
from geokernel.contracts.surge import SURGES_KEY, SurgeSignal
from geokernel.errors import SpecError
from geokernel.partition_spec.model import Spec
from geokernel.partition_spec.parse import spec_from_json
from geokernel.partition_spec.rules import check
from lambdas.runtime.clients import error_code
from lambdas.runtime.errors import AdapterError


class SpecExists(AdapterError):
    """A spec object for this version already exists (specs are immutable)."""


SPEC_CACHE = 3  # parsed specs a SpecStore keeps (SpecStore._remember)


class SpecStore:
    """Immutable spec objects in the specs bucket (parsed specs cached by key: they never change)."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self._s3 = s3
        self.bucket = bucket
        self._cache: dict[str, Spec] = {}

    def put_new(self, spec: Spec) -> str:
        """Write ``spec`` at its version's key unless one exists (raise SpecExists); return the key."""
        key = spec_key(spec.version)
        try:
            self._s3.put_object(Bucket=self.bucket, Key=key, Body=(spec.to_json() + "\n").encode(),
                                ContentType="application/json", IfNoneMatch="*")
        except ClientError as exc:
            if error_code(exc) in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise SpecExists(f"spec s3://{self.bucket}/{key} already exists; specs are never overwritten") from exc
            raise AdapterError(f"cannot write spec s3://{self.bucket}/{key}: {exc}") from exc
        self._remember(key, spec)
        return key

    def get(self, key: str) -> Spec:
        """Read, parse and validate the spec at ``key``; raise SpecError naming the object."""
        if key in self._cache:
            spec = self._cache.pop(key)
            self._cache[key] = spec  # most recently used last
            return spec
        where = f"s3://{self.bucket}/{key}"
        try:
            body = self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as exc:
            raise SpecError(f"cannot read spec {where}: {error_code(exc) or exc}") from exc
        spec = check(spec_from_json(body, where))
        self._remember(key, spec)
        return spec

    def _remember(self, key: str, spec: Spec) -> None:
        """Keep at most :data:`SPEC_CACHE` parsed specs, the most recently used: a swap needs the active spec and
        the one it swaps to (and the previous one while it drains). A 1M-quadkey spec of ~1,100 workers is ~84 MB
        parsed, so a cache that kept every version a warm function has seen would fill a 1 GB function."""
        self._cache.pop(key, None)
        while len(self._cache) >= SPEC_CACHE:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = spec

    def get_version(self, version: int) -> Spec:
        spec = self.get(spec_key(version))
        if spec.version != version:
            raise SpecError(f"spec object s3://{self.bucket}/{spec_key(version)} holds version {spec.version!r}")
        return spec

    def put_stream_manifest(self, manifest: StreamManifest) -> str:
        """Write a geo stream's shard map (:func:`~geokernel.contracts.stream_manifest_key`); return its key."""
        key = stream_manifest_key(manifest.version)
        try:
            self._s3.put_object(Bucket=self.bucket, Key=key, Body=manifest.to_json().encode(),
                                ContentType="application/json")
        except ClientError as exc:
            raise AdapterError(f"cannot write stream manifest s3://{self.bucket}/{key}: {exc}") from exc
        return key


class ObjectStore:
    """Plain reads of one bucket (snapshots)."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self._s3 = s3
        self.bucket = bucket

    def read(self, key: str) -> bytes | None:
        """Return the object's bytes, or None if it does not exist."""
        try:
            return bytes(self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())
        except ClientError as exc:
            if error_code(exc) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise AdapterError(f"cannot read s3://{self.bucket}/{key}: {exc}") from exc

    def list_keys(self, prefix: str) -> list[str]:
        keys: list[str] = []
        token: str | None = None
        while True:
            kw: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
            if token:
                kw["ContinuationToken"] = token
            try:
                resp = self._s3.list_objects_v2(**kw)
            except ClientError as exc:
                raise AdapterError(f"cannot list s3://{self.bucket}/{prefix}: {exc}") from exc
            keys += [o["Key"] for o in resp.get("Contents", [])]
            if not resp.get("IsTruncated"):
                return keys
            token = resp.get("NextContinuationToken")


class SurgeStore:
    """The fast path's objects in the specs bucket (:mod:`geokernel.contracts.surge`): a router environment's surge
    signals (put once per key: the first environment's is the one) and the partitioner's relieved surges."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self._s3 = s3
        self.bucket = bucket

    def put_signal(self, signal: SurgeSignal) -> bool:
        """Put ``signal`` at its key unless one is there (``If-None-Match: *``); False when one was (412)."""
        return self._put(signal.key, signal.to_bytes(), if_none_match=True)

    def signal(self, key: str) -> SurgeSignal | None:
        """The signal at ``key`` (None when it is gone); :class:`ContractError` when it does not decode."""
        raw = ObjectStore(self._s3, self.bucket).read(key)
        return None if raw is None else SurgeSignal.from_bytes(raw, f"s3://{self.bucket}/{key}")

    def surges(self) -> tuple[bytes | None, str | None]:
        """The relieved surges' object (:data:`SURGES_KEY`) and its ETag; (None, None) when there is none."""
        try:
            obj = self._s3.get_object(Bucket=self.bucket, Key=SURGES_KEY)
        except ClientError as exc:
            if error_code(exc) in ("NoSuchKey", "404", "NotFound"):
                return None, None
            raise AdapterError(f"cannot read s3://{self.bucket}/{SURGES_KEY}: {exc}") from exc
        return bytes(obj["Body"].read()), str(obj.get("ETag", "")) or None

    def put_surges(self, body: bytes, etag: str | None) -> bool:
        """Replace the relieved surges if they are still the ones read (``If-Match: etag``; none read:
        ``If-None-Match: *``); False when another writer's came first."""
        return self._put(SURGES_KEY, body, if_match=etag, if_none_match=etag is None)

    def _put(self, key: str, body: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> bool:
        kw: dict[str, Any] = {"Bucket": self.bucket, "Key": key, "Body": body, "ContentType": "application/json"}
        if if_match is not None:
            kw["IfMatch"] = if_match
        elif if_none_match:
            kw["IfNoneMatch"] = "*"
        try:
            self._s3.put_object(**kw)
        except ClientError as exc:
            if error_code(exc) in ("PreconditionFailed", "ConditionalRequestConflict", "412"):
                return False
            raise AdapterError(f"cannot write s3://{self.bucket}/{key}: {exc}") from exc
        return True


@dataclass(frozen=True)
class CostRates:
    """Merged latest cost reports of one spec version: normalised cost per event per grid quadkey."""

    version: int
    rates: Mapping[str, float] = field(default_factory=dict)
    reports: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()  # why each unreadable latest report was left out, naming its key


class CostReports:
    """Worker cost reports ``costs/v<version>/<worker_id>/<epoch_s>.json`` (latest per worker)."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self._store = ObjectStore(s3, bucket)
        self.bucket = bucket

    def latest(self, version: int) -> CostRates:
        """Merge each worker's latest report of ``version``; an unreadable one is skipped, named in ``skipped``.

        Reports are decoded by the contract (:class:`~geokernel.contracts.cost.CostReportRecord`); a report it
        rejects is left out whole (a worker's stale rates are better than half of a broken report).
        """
        latest: dict[str, tuple[int, str]] = {}
        for key in self._store.list_keys(cost_prefix(version)):
            parsed = parse_cost_key(key)
            if parsed is None:
                continue
            _version, worker, stamp = parsed
            if worker not in latest or stamp > latest[worker][0]:
                latest[worker] = (stamp, key)
        rates: dict[str, float] = {}
        used: list[str] = []
        skipped: list[str] = []
        for _stamp, key in sorted(latest.values()):
            try:
                report = CostReportRecord.from_json(self._store.read(key) or b"", key)
            except ContractError as exc:
                skipped.append(str(exc))
                continue
            rates.update(report.rates)
            used.append(key)
        return CostRates(version, rates, tuple(used), tuple(skipped))


class QuarantineSink:
    """Writes quarantine records (JSON lines) under ``quarantine/<source>/`` in the quarantine bucket."""

    def __init__(self, s3: Any, bucket: str, source: str) -> None:
        self._s3 = s3
        self.bucket = bucket
        self.source = source

    def write(self, records: Sequence[Mapping[str, Any]]) -> str:
        """Write ``records`` as one object; return its key. Raises AdapterError on failure."""
        day = datetime.now(UTC).strftime("%Y-%m-%d")
        key = lambda_quarantine_key(self.source, day, int(time.time() * 1000), uuid.uuid4().hex[:12])
        body = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records).encode()
        try:
            self._s3.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType="application/x-ndjson")
        except ClientError as exc:
            raise AdapterError(f"cannot write quarantine s3://{self.bucket}/{key}: {exc}") from exc
        return key
