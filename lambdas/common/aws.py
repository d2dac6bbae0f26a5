"""Small AWS adapters the handlers and the deploy controller talk through.

Each adapter wraps one boto3 client and knows the request/response shapes of one concern, so the
per-record logic stays typed and testable. :func:`make_clients` builds the clients once per module
(pointed at moto when ``AWS_ENDPOINT_URL`` is set). Names and keys follow ``docs/CONTRACTS.md``.
"""

from __future__ import annotations

import functools
import json
import math
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from lambdas.common.config import LambdaConfig
from lambdas.common.errors import LambdaError
from partitioner.contracts.lease import LEASE_KEY_ATTR, LeaseRecord, lease_key
from partitioner.contracts.plan import SwapMode
from partitioner.contracts.spec_pointer import spec_key
from partitioner.contracts.stream import ShardRange, StreamManifest, stream_manifest_key
from partitioner.errors import SpecError
from partitioner.spec import Spec, check, spec_from_json

if TYPE_CHECKING:
    from lambdas.deploy.plan import DeployPlan

KINESIS_MAX_RECORDS = 500
KINESIS_MAX_BYTES = 5 * 1024 * 1024


class AdapterError(LambdaError, RuntimeError):
    """An AWS call failed in a way the caller must handle; the message names the resource."""


class SpecExists(AdapterError):
    """A spec object for this version already exists (specs are immutable)."""


def now_iso(ts: float | None = None) -> str:
    """Return an ISO-8601 UTC timestamp with a ``Z`` suffix."""
    return datetime.fromtimestamp(time.time() if ts is None else ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


@dataclass(frozen=True)
class Clients:
    """The boto3 clients a handler uses (made once per module)."""

    s3: Any
    dynamodb: Any
    kinesis: Any
    ecs: Any


def make_clients(config: LambdaConfig) -> Clients:
    """Return boto3 clients for ``config`` (moto when ``endpoint_url`` is set).

    Clients are thread-safe and costly to build, so one set is made per (region, endpoint) and process.
    """
    return _clients(config.region, config.endpoint_url)


@functools.cache
def _clients(region: str, endpoint_url: str | None) -> Clients:
    cfg = Config(retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=5, read_timeout=30)
    kw: dict[str, Any] = {"region_name": region, "config": cfg}
    if endpoint_url:
        kw["endpoint_url"] = endpoint_url
    return Clients(s3=boto3.client("s3", **kw), dynamodb=boto3.client("dynamodb", **kw),
                   kinesis=boto3.client("kinesis", **kw), ecs=boto3.client("ecs", **kw))


# ---------------------------------------------------------------------------
# DynamoDB: control table
# ---------------------------------------------------------------------------


def _to_ddb(value: Any) -> dict[str, Any]:
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, float) and not math.isfinite(value):
        return {"S": repr(value)}  # DynamoDB numbers cannot be NaN or infinite
    if isinstance(value, (int, float, Decimal)):
        return {"N": str(value)}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, Mapping):
        return {"M": {str(k): _to_ddb(v) for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        return {"L": [_to_ddb(v) for v in value]}
    raise AdapterError(f"cannot store {value!r} of type {type(value).__name__} in DynamoDB")


def _from_ddb(attr: Mapping[str, Any]) -> Any:
    (kind, v), = attr.items()
    if kind == "NULL":
        return None
    if kind == "BOOL":
        return bool(v)
    if kind == "N":
        d = Decimal(v)
        return int(d) if d == d.to_integral_value() and "." not in v and "e" not in v.lower() else float(d)
    if kind == "S":
        return v
    if kind == "M":
        return {k: _from_ddb(x) for k, x in v.items()}
    if kind == "L":
        return [_from_ddb(x) for x in v]
    if kind == "SS":
        return list(v)
    raise AdapterError(f"unsupported DynamoDB attribute type {kind!r}")


class ControlTable:
    """The control table (key ``pk``): desired/active/deploy/policy/snapshot items, conditional writes."""

    def __init__(self, dynamodb: Any, table: str) -> None:
        self._ddb = dynamodb
        self.table = table

    def get(self, pk: str) -> dict[str, Any] | None:
        """Return the item ``pk`` as plain Python values (strongly consistent), or None."""
        try:
            resp = self._ddb.get_item(TableName=self.table, Key={"pk": {"S": pk}}, ConsistentRead=True)
        except ClientError as exc:
            raise AdapterError(f"control table {self.table!r}: get {pk!r} failed: {exc}") from exc
        item = resp.get("Item")
        return None if item is None else {k: _from_ddb(v) for k, v in item.items()}

    def put(self, pk: str, item: Mapping[str, Any], *, condition: str | None = None,
            values: Mapping[str, Any] | None = None) -> bool:
        """Put ``item`` at ``pk``; return False when ``condition`` does not hold."""
        body = {"pk": {"S": pk}, **{k: _to_ddb(v) for k, v in item.items() if k != "pk"}}
        kw: dict[str, Any] = {"TableName": self.table, "Item": body}
        if condition:
            kw["ConditionExpression"] = condition
            if values:
                kw["ExpressionAttributeValues"] = {k: _to_ddb(v) for k, v in values.items()}
        try:
            self._ddb.put_item(**kw)
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise AdapterError(f"control table {self.table!r}: put {pk!r} failed: {exc}") from exc
        return True

    def put_forward(self, pk: str, item: Mapping[str, Any]) -> bool:
        """Put ``item`` (which has an int ``version``) only if ``pk`` is absent or holds a lower version."""
        return self.put(pk, item, condition="attribute_not_exists(pk) OR version < :v",
                        values={":v": int(item["version"])})

    def put_if_rev(self, pk: str, item: Mapping[str, Any], expected_rev: int | None) -> bool:
        """Optimistic lock: put ``item`` (with ``rev = expected_rev + 1``) only if the stored ``rev`` matches."""
        if expected_rev is None:
            return self.put(pk, item, condition="attribute_not_exists(pk)")
        return self.put(pk, item, condition="rev = :r", values={":r": expected_rev})


# ---------------------------------------------------------------------------
# DynamoDB: leases table (read side; the workers write)
# ---------------------------------------------------------------------------


#: One worker-slot lease as the control plane sees it (:class:`partitioner.contracts.LeaseRecord`).
LeaseView = LeaseRecord


class LeaseTable:
    """Reads leases ``v<version>#<worker_id>`` in batches (strongly consistent)."""

    def __init__(self, dynamodb: Any, table: str) -> None:
        self._ddb = dynamodb
        self.table = table

    def states(self, version: int, worker_ids: Sequence[str]) -> dict[str, LeaseView]:
        """Return the leases that exist among ``worker_ids`` of ``version`` (absent workers are left out)."""
        out: dict[str, LeaseView] = {}
        keys = [lease_key(version, w) for w in worker_ids]
        for i in range(0, len(keys), 100):
            pending: list[dict[str, Any]] = [{LEASE_KEY_ATTR: {"S": k}} for k in keys[i:i + 100]]
            for _attempt in range(8):
                if not pending:
                    break
                try:
                    resp = self._ddb.batch_get_item(
                        RequestItems={self.table: {"Keys": pending, "ConsistentRead": True}})
                except ClientError as exc:
                    raise AdapterError(f"leases table {self.table!r}: batch get failed: {exc}") from exc
                for raw in resp.get("Responses", {}).get(self.table, []):
                    lease = LeaseRecord.from_raw(raw)
                    out[lease.worker_id] = lease
                pending = resp.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
                if pending:
                    time.sleep(0.05 * (_attempt + 1))
            if pending:
                raise AdapterError(f"leases table {self.table!r}: {len(pending)} keys left unprocessed")
        return out


# ---------------------------------------------------------------------------
# S3: specs, snapshots, cost reports, quarantine
# ---------------------------------------------------------------------------


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
        parsed, so an unbounded cache (17 were kept before) fills a 1 GB function."""
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
        """Write a geo stream's shard map (:func:`~partitioner.contracts.stream_manifest_key`); return its key."""
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


@dataclass(frozen=True)
class CostRates:
    """Merged latest cost reports of one spec version: normalised cost per event per grid quadkey."""

    version: int
    rates: Mapping[str, float] = field(default_factory=dict)
    reports: tuple[str, ...] = ()


class CostReports:
    """Worker cost reports ``costs/v<version>/<worker_id>/<epoch_s>.json`` (latest per worker)."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self._store = ObjectStore(s3, bucket)
        self.bucket = bucket

    def latest(self, version: int) -> CostRates:
        """Merge each worker's latest report of ``version``; unreadable reports are skipped with their key named."""
        latest: dict[str, tuple[int, str]] = {}
        for key in self._store.list_keys(f"costs/v{version}/"):
            parts = key.split("/")
            if len(parts) != 4 or not parts[3].endswith(".json"):
                continue
            try:
                stamp = int(parts[3][:-5])
            except ValueError:
                continue
            if parts[2] not in latest or stamp > latest[parts[2]][0]:
                latest[parts[2]] = (stamp, key)
        rates: dict[str, float] = {}
        used: list[str] = []
        for _stamp, key in sorted(latest.values()):
            body = self._store.read(key)
            try:
                doc = json.loads(body or b"")
                report_rates = doc["rates"]
                if not isinstance(report_rates, dict):
                    raise TypeError("rates is not an object")
                clean = {str(q): float(r) for q, r in report_rates.items()
                         if isinstance(r, (int, float)) and not isinstance(r, bool) and r >= 0 and r == r}
            except (ValueError, KeyError, TypeError):
                continue
            rates.update(clean)
            used.append(key)
        return CostRates(version, rates, tuple(used))


class QuarantineSink:
    """Writes quarantine records (JSON lines) under ``quarantine/<source>/`` in the quarantine bucket."""

    def __init__(self, s3: Any, bucket: str, source: str) -> None:
        self._s3 = s3
        self.bucket = bucket
        self.source = source

    def write(self, records: Sequence[Mapping[str, Any]]) -> str:
        """Write ``records`` as one object; return its key. Raises AdapterError on failure."""
        day = datetime.now(UTC).strftime("%Y-%m-%d")
        key = f"quarantine/{self.source}/{day}/{int(time.time() * 1000)}-{uuid.uuid4().hex[:12]}.jsonl"
        body = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records).encode()
        try:
            self._s3.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType="application/x-ndjson")
        except ClientError as exc:
            raise AdapterError(f"cannot write quarantine s3://{self.bucket}/{key}: {exc}") from exc
        return key


# ---------------------------------------------------------------------------
# Kinesis: geo streams
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PutEntry:
    """One record for a geo stream."""

    data: bytes
    partition_key: str
    explicit_hash_key: str


@dataclass(frozen=True)
class ShardQuota:
    """The account's provisioned-shard quota in the region and how many shards are open now."""

    limit: int
    open: int

    def room_for(self, shards: int) -> bool:
        return self.open + shards <= self.limit


class GeoStreams:
    """The per-version geo streams: create (provisioned), encrypt, status, delete, put_records.

    ``kms_key`` (``GEO_STREAM_KMS_KEY``: key ARN, id or alias) is the key the deployer turns
    server-side encryption on with; None leaves streams unencrypted (the router, which only puts,
    needs no key).
    """

    def __init__(self, kinesis: Any, kms_key: str | None = None) -> None:
        self._k = kinesis
        self.kms_key = kms_key

    def create(self, name: str, shards: int) -> None:
        """Create ``name`` with ``shards`` shards (provisioned); an existing stream is left as it is."""
        try:
            self._k.create_stream(StreamName=name, ShardCount=shards, StreamModeDetails={"StreamMode": "PROVISIONED"})
        except ClientError as exc:
            if error_code(exc) != "ResourceInUseException":
                raise AdapterError(f"cannot create geo stream {name!r} with {shards} shards: {exc}") from exc

    def start_encryption(self, name: str) -> bool:
        """Turn on KMS encryption of the ACTIVE stream ``name`` unless it is on; True if it was started now.

        The stream is ``UPDATING`` for a few seconds after a start (wait for ``ACTIVE`` again);
        records put after that are encrypted. Without a ``kms_key`` this does nothing.
        """
        if not self.kms_key:
            return False
        try:
            summary = self._k.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
            if summary.get("EncryptionType") == "KMS":
                return False
            self._k.start_stream_encryption(StreamName=name, EncryptionType="KMS", KeyId=self.kms_key)
        except ClientError as exc:
            raise AdapterError(f"cannot turn on KMS encryption of geo stream {name!r} with key "
                               f"{self.kms_key!r}: {exc}") from exc
        return True

    def shard_quota(self) -> ShardQuota:
        """The account's shard quota and open shards in this region (``DescribeLimits``: one call per second per
        account, https://docs.aws.amazon.com/kinesis/latest/APIReference/API_DescribeLimits.html)."""
        try:
            resp = self._k.describe_limits()
        except ClientError as exc:
            raise AdapterError(f"cannot read the Kinesis shard quota (DescribeLimits): {exc}") from exc
        return ShardQuota(limit=int(resp["ShardLimit"]), open=int(resp["OpenShardCount"]))

    def shards(self, name: str) -> tuple[ShardRange, ...]:
        """Every shard of ``name`` (``ListShards``, paginated; 1,000 calls/s per stream,
        https://docs.aws.amazon.com/kinesis/latest/APIReference/API_ListShards.html)."""
        out: list[ShardRange] = []
        kwargs: dict[str, Any] = {"StreamName": name}
        try:
            while True:
                resp = self._k.list_shards(**kwargs)
                out += [ShardRange.from_list_shards(s) for s in resp.get("Shards", [])]
                if not resp.get("NextToken"):
                    return tuple(out)
                kwargs = {"NextToken": resp["NextToken"]}
        except ClientError as exc:
            raise AdapterError(f"cannot list the shards of geo stream {name!r}: {exc}") from exc

    def status(self, name: str) -> str | None:
        """Return the stream status (``CREATING``, ``ACTIVE``, ...) or None when it does not exist."""
        try:
            return str(self._k.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamStatus"])
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return None
            raise AdapterError(f"cannot describe geo stream {name!r}: {exc}") from exc

    def wait_active(self, name: str, timeout_s: float, poll_s: float = 2.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.status(name) == "ACTIVE":
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)

    def delete(self, name: str) -> None:
        """Delete ``name`` (and its consumers); a missing stream is fine."""
        try:
            self._k.delete_stream(StreamName=name, EnforceConsumerDeletion=True)
        except ClientError as exc:
            if error_code(exc) != "ResourceNotFoundException":
                raise AdapterError(f"cannot delete geo stream {name!r}: {exc}") from exc

    def put_records(self, name: str, entries: Sequence[PutEntry]) -> list[int]:
        """Put ``entries`` in order-preserving chunks; return the indices that failed (never raises per record)."""
        failed: list[int] = []
        for chunk in chunk_entries(entries):
            batch = [{"Data": entries[i].data, "PartitionKey": entries[i].partition_key,
                      "ExplicitHashKey": entries[i].explicit_hash_key} for i in chunk]
            try:
                resp = self._k.put_records(StreamName=name, Records=batch)
            except ClientError:
                failed += chunk
                continue
            failed += [i for i, r in zip(chunk, resp["Records"], strict=True) if r.get("ErrorCode")]
        return failed


def chunk_entries(entries: Sequence[PutEntry]) -> Iterable[list[int]]:
    """Indices of ``entries`` in order, in PutRecords-sized chunks (500 records, 5 MiB)."""
    chunk: list[int] = []
    size = 0
    for i, e in enumerate(entries):
        n = len(e.data) + len(e.partition_key.encode())
        if chunk and (len(chunk) >= KINESIS_MAX_RECORDS or size + n > KINESIS_MAX_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(i)
        size += n
    if chunk:
        yield chunk


# ---------------------------------------------------------------------------
# ECS: the headless geo-worker service
# ---------------------------------------------------------------------------


CODE_REVISION = "CODE_REVISION"  # env marker on a revision the deployer registered: the template revision it copies


class EcsService:
    """The geo-worker ECS service: register a revision carrying ``SPEC_VERSION`` and set the desired count."""

    def __init__(self, ecs: Any, cluster: str, service: str) -> None:
        self._ecs = ecs
        self.cluster = cluster
        self.service = service

    def current_task_definition(self) -> str:
        try:
            svcs = self._ecs.describe_services(cluster=self.cluster, services=[self.service])["services"]
        except ClientError as exc:
            raise AdapterError(f"cannot describe ECS service {self.service!r} in {self.cluster!r}: {exc}") from exc
        if not svcs:
            raise AdapterError(f"ECS service {self.service!r} not found in cluster {self.cluster!r}")
        return str(svcs[0]["taskDefinition"])

    def _describe(self, task_definition: str) -> dict[str, Any]:
        try:
            return dict(self._ecs.describe_task_definition(taskDefinition=task_definition)["taskDefinition"])
        except ClientError as exc:
            raise AdapterError(f"cannot describe task definition {task_definition!r}: {exc}") from exc

    def running_code(self) -> str:
        """The code the service runs: the template revision its revision was copied from (``CODE_REVISION``), or
        its own revision ARN when it runs a template revision itself."""
        current = self.current_task_definition()
        for c in self._describe(current)["containerDefinitions"]:
            for e in c.get("environment", []):
                if e.get("name") == CODE_REVISION and e.get("value"):
                    return str(e["value"])
        return current

    def running_spec_version(self) -> int | None:
        """``SPEC_VERSION`` of the revision the service runs (None: a generic carry-mode revision)."""
        for c in self._describe(self.current_task_definition())["containerDefinitions"]:
            for e in c.get("environment", []):
                if e.get("name") == "SPEC_VERSION" and str(e.get("value", "")).isdigit():
                    return int(e["value"])
        return None

    def deploying(self) -> bool:
        """True while ECS lists more than one deployment of the service (one is rolling out or back)."""
        try:
            svcs = self._ecs.describe_services(cluster=self.cluster, services=[self.service])["services"]
        except ClientError as exc:
            raise AdapterError(f"cannot describe ECS service {self.service!r} in {self.cluster!r}: {exc}") from exc
        return bool(svcs) and len(svcs[0].get("deployments", [])) > 1

    def register_revision(self, version: int, base: str = "") -> str:
        """Copy ``base`` (the stack's template revision; default: the service's current one) with
        ``SPEC_VERSION=<version>`` and ``CODE_REVISION=<base>`` on every container; return the new ARN."""
        base = base or self.current_task_definition()
        td = self._describe(base)
        marks = {"SPEC_VERSION": str(version), CODE_REVISION: str(td.get("taskDefinitionArn") or base)}
        containers = []
        for c in td["containerDefinitions"]:
            env = [e for e in c.get("environment", []) if e.get("name") not in marks]
            env.extend({"name": k, "value": v} for k, v in marks.items())
            containers.append({**c, "environment": env})
        keep = ("taskRoleArn", "executionRoleArn", "networkMode", "volumes", "placementConstraints",
                "requiresCompatibilities", "cpu", "memory", "runtimePlatform", "ephemeralStorage", "pidMode",
                "ipcMode", "proxyConfiguration")
        kw = {k: td[k] for k in keep if td.get(k) not in (None, [], {})}
        try:
            out = self._ecs.register_task_definition(family=td["family"], containerDefinitions=containers, **kw)
        except ClientError as exc:
            raise AdapterError(f"cannot register a revision of {td['family']!r} for spec v{version}: {exc}") from exc
        return str(out["taskDefinition"]["taskDefinitionArn"])

    def deploy(self, task_definition: str, desired: int) -> None:
        """Point the service at ``task_definition`` with ``desired`` tasks (starts an ECS blue/green deployment)."""
        try:
            self._ecs.update_service(cluster=self.cluster, service=self.service, taskDefinition=task_definition,
                                     desiredCount=desired)
        except ClientError as exc:
            raise AdapterError(f"cannot update ECS service {self.service!r} to {task_definition!r}: {exc}") from exc

    def desired_count(self) -> int:
        """The service's desired count now (one DescribeServices)."""
        try:
            svcs = self._ecs.describe_services(cluster=self.cluster, services=[self.service])["services"]
        except ClientError as exc:
            raise AdapterError(f"cannot describe ECS service {self.service!r} in {self.cluster!r}: {exc}") from exc
        return int(svcs[0].get("desiredCount", 0)) if svcs else 0

    def scale(self, desired: int) -> None:
        """Set only the desired count: the current tasks keep running, ECS adds or removes tasks.

        A service deployment (and so ECS's blue/green lifecycle and its hooks) starts only when a property
        recorded in a service revision changes: task definition, networking, capacity providers, load
        balancers, ...; the desired count is not one of them, so this scales the current deployment
        (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/service-revision.html, "Service revision
        lifecycle": a revision is created "when you create a service, or update a service property that starts a
        deployment"; https://docs.aws.amazon.com/AmazonECS/latest/developerguide/service-revision-property.html
        lists the properties). On a scale-in ECS chooses which tasks stop but never a task whose scale-in
        protection is on (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-scale-in-protection.html):
        every worker holding a lease protects its task (``geo_service.protection``).
        """
        if desired < 0:
            raise AdapterError(f"desired count of ECS service {self.service!r} must be >= 0, got {desired!r}")
        try:
            self._ecs.update_service(cluster=self.cluster, service=self.service, desiredCount=desired)
        except ClientError as exc:
            raise AdapterError(f"cannot set the desired count of ECS service {self.service!r} to {desired}: "
                               f"{exc}") from exc


LAUNCH_STEP = 40  # tasks the deployer adds to the worker service per step (EcsFleet.advance)


class EcsFleet:
    """The deploy controller's fleet adapter on ECS (see :class:`lambdas.deploy.controller.Fleet`).

    ``carry`` plans (the default) run on one service of generic worker tasks: ``start`` raises the desired
    count to every old slot plus the started ones, ``stop`` lowers it to the new slot count once the old
    version drained, ``abort`` lowers it back to the old slot count. Carried slots need no task: the process
    holding ``v<n>#w`` claims ``v<n+1>#w`` itself. ECS replaces a task that stops while the desired count still
    counts it (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/ecs_services.html: "If a task in a
    service stops, the scheduler launches a new task to replace it"), so a drained worker does not exit: it drops
    its scale-in protection and waits, and the lowered desired count stops exactly the unprotected tasks.

    ``whole`` plans use ECS's own blue/green deployment: ``start`` registers a copy of ``template`` (the stack's
    revision, ``WORKER_TASK_DEFINITION``; the service's current one when unset) carrying ``SPEC_VERSION`` with the
    new slot count; ECS stops blue itself in its CLEAN_UP stage and green when a hook returns FAILED, so ``stop``
    and ``abort`` do nothing. :meth:`code_stale` tells the controller the fleet runs other code than ``template``:
    it then plans the swap ``whole`` whatever the mode, which is how new worker code reaches a carry fleet.
    """

    def __init__(self, service: EcsService, template: str = "") -> None:
        self.service = service
        self.template = template

    def code_stale(self) -> bool:
        """True when the stack's template revision is known and the service runs code copied from another one."""
        return bool(self.template) and self.service.running_code() != self.template

    def reconcile(self, version: int, worker_ids: Sequence[str]) -> bool:
        """``whole`` mode: if the service runs another ``SPEC_VERSION`` than the live ``version`` (ECS rolled a
        deployment back after the flip), deploy ``version`` again, a task per slot of ``worker_ids``; True if it did.

        The router follows control ``pk="active"``; a rollback after the flip (circuit breaker, a hook that timed
        out) brings back the previous revision, whose stream the drain step may have deleted. Waits while ECS
        still lists more than one deployment."""
        if self.service.deploying() or self.service.running_spec_version() == version:
            return False
        self.service.deploy(self.service.register_revision(version, self.template), len(worker_ids))
        return True

    def rolled_back(self, version: int) -> bool:
        """``whole`` mode: True when ECS ended the deployment of ``version`` on another revision (a lifecycle hook
        failed or timed out, or the circuit breaker tripped: "If your function doesn't return a valid hookStatus, or
        if it fails, Amazon ECS rolls back the deployment",
        https://docs.aws.amazon.com/AmazonECS/latest/developerguide/lambda-lifecycle-hooks.html): the service is
        steady and runs another ``SPEC_VERSION``."""
        return not self.service.deploying() and self.service.running_spec_version() != version

    def start(self, plan: DeployPlan) -> None:
        if plan.mode is SwapMode.WHOLE:
            self.service.deploy(self.service.register_revision(plan.to_version, self.template), plan.new_slots)
        else:
            self.advance(plan)

    def advance(self, plan: DeployPlan) -> bool:
        """``carry``: raise the desired count one step (at most :data:`LAUNCH_STEP` tasks) toward
        ``plan.peak_workers``; True once it is there. ``whole``: ECS launches the green fleet itself (True).

        Fargate launches tasks from a token bucket of 100 per account and region refilled at 20 per second
        (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/throttling.html); the deployer steps every
        ``HOOK_CALLBACK_DELAY_S`` (15 s), so a step of 40 keeps any second at 40 % of the bucket and the sustained
        rate near 3 per second, and leaves the rest of the account's launches to other services. A
        thousand-slot fleet then starts in about 6 minutes, within the 15-minute green timeout."""
        if plan.mode is SwapMode.WHOLE:
            return True
        target = plan.peak_workers
        current = self.service.desired_count()
        if current == target:
            return True
        self.service.scale(target if current > target else min(target, current + LAUNCH_STEP))
        return current > target or current + LAUNCH_STEP >= target

    def stop(self, plan: DeployPlan) -> None:
        if plan.mode is SwapMode.CARRY:
            self.service.scale(plan.new_slots)

    def abort(self, plan: DeployPlan) -> None:
        if plan.mode is SwapMode.CARRY:
            self.service.scale(plan.old_slots)
