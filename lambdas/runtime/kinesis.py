"""Kinesis adapter: the per-version geo streams (create, encrypt, shards, status, delete, put records).

Every spec version gets its own provisioned stream (``docs/CONTRACTS.md``); the deploy controller creates and
deletes them, the router puts records in PutRecords-sized chunks (:func:`chunk_entries`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from geokernel.contracts.stream import ShardRange, StreamStatus
from lambdas.runtime.clients import error_code
from lambdas.runtime.errors import AdapterError
from lambdas.runtime.pacing import Pacer

KINESIS_MAX_RECORDS = 500
KINESIS_MAX_BYTES = 5 * 1024 * 1024
#: The tag naming the deployment (the stack's id, ``DEPLOYMENT_ID``) that created a geo stream.
DEPLOYMENT_TAG = "geo-rebalancer:deployment"
LIST_PAGE = 100  # ListStreams' page size (its default and most: API_ListStreams.html)
#: The error codes of a put a stream throttled (PutRecords per record, or the whole call): API_PutRecords.html.
THROTTLED = frozenset({"ProvisionedThroughputExceededException", "KMSThrottlingException", "ThrottlingException"})


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

    ``deployment`` (``DEPLOYMENT_ID``: the stack's id) tags every stream this creates (:data:`DEPLOYMENT_TAG`), so
    :meth:`owned` tells this deployment's streams from those an earlier deployment with the same prefix left; None
    (the local loop, tests) tags nothing and owns every stream.

    ``throttled`` counts the records :meth:`put_records` had throttled (the router's ``GeoWriteThrottled`` metric).
    """

    def __init__(self, kinesis: Any, kms_key: str | None = None, pacer: Pacer | None = None,
                 deployment: str | None = None) -> None:
        self._k = kinesis
        self.kms_key = kms_key
        self.pacer = pacer
        self.deployment = deployment
        self.throttled = 0

    def paced(self, pacer: Pacer | None) -> GeoStreams:
        """The same streams, their puts paced by ``pacer`` (one invocation's, :mod:`lambdas.runtime.pacing`)."""
        return GeoStreams(self._k, self.kms_key, pacer, self.deployment)

    def create(self, name: str, shards: int) -> None:
        """Create ``name`` with ``shards`` shards (provisioned), tagged with the deployment; an existing stream is
        left as it is (:meth:`owned` says whose it is).

        The tags come with the create: ``AddTagsToStream`` would have to wait for ACTIVE, and a stream seen
        untagged in between could not be told from another deployment's (CreateStream's ``Tags`` also need
        ``kinesis:AddTagsToStream``: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonkinesisdatastreams.html).
        """
        tags = {"Tags": {DEPLOYMENT_TAG: self.deployment}} if self.deployment else {}
        try:
            self._k.create_stream(StreamName=name, ShardCount=shards, StreamModeDetails={"StreamMode": "PROVISIONED"},
                                  **tags)
        except ClientError as exc:
            if error_code(exc) != "ResourceInUseException":
                raise AdapterError(f"cannot create geo stream {name!r} with {shards} shards: {exc}") from exc

    def owned(self, name: str) -> bool:
        """True when this deployment created ``name`` (its :data:`DEPLOYMENT_TAG` is ``deployment``), or when no
        deployment is set; False for a stream another deployment with the same prefix left (``ListTagsForStream``:
        five calls per second per account, one per new version here)."""
        if not self.deployment:
            return True
        kwargs: dict[str, Any] = {"StreamName": name}
        try:
            while True:
                resp = self._k.list_tags_for_stream(**kwargs)
                tags = resp.get("Tags", [])
                if any(t.get("Key") == DEPLOYMENT_TAG for t in tags):
                    return any(t.get("Key") == DEPLOYMENT_TAG and t.get("Value") == self.deployment for t in tags)
                if not resp.get("HasMoreTags") or not tags:
                    return False
                kwargs["ExclusiveStartTagKey"] = tags[-1]["Key"]
        except ClientError as exc:
            raise AdapterError(f"cannot read the tags of geo stream {name!r}: {exc}") from exc

    def named(self, prefix: str, page: int = LIST_PAGE) -> list[tuple[str, str]]:
        """``(name, status)`` of every stream of the account and region whose name starts with ``prefix``
        (``ListStreams``, paginated by ``NextToken``: https://docs.aws.amazon.com/kinesis/latest/APIReference/API_ListStreams.html)."""
        out: list[tuple[str, str]] = []
        kwargs: dict[str, Any] = {"Limit": page}
        try:
            while True:
                resp = self._k.list_streams(**kwargs)
                summaries = [(str(s["StreamName"]), str(s.get("StreamStatus", "")))
                             for s in resp.get("StreamSummaries", [])] or [(str(n), "") for n in resp.get("StreamNames", [])]
                out += [(name, status) for name, status in summaries if name.startswith(prefix)]
                if not resp.get("HasMoreStreams") or not summaries:
                    return out
                token = resp.get("NextToken")  # else the older form: continue after the last name
                kwargs = {"Limit": page, **({"NextToken": token} if token else {"ExclusiveStartStreamName": summaries[-1][0]})}
        except ClientError as exc:
            raise AdapterError(f"cannot list the streams named {prefix!r}*: {exc}") from exc

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
            raise AdapterError(f"cannot list the shards of stream {name!r}: {exc}") from exc

    def status(self, name: str) -> str | None:
        """Return the stream status (``CREATING``, ``ACTIVE``, ...) or None when it does not exist."""
        try:
            return str(self._k.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamStatus"])
        except ClientError as exc:
            if error_code(exc) == "ResourceNotFoundException":
                return None
            raise AdapterError(f"cannot describe geo stream {name!r}: {exc}") from exc

    def wait_active(self, name: str, timeout_s: float, poll_s: float = 2.0) -> bool:
        """True once ``name`` is ACTIVE; False after ``timeout_s``, or at once when it is being deleted (it will not
        become ACTIVE: a stale stream the deploy controller deletes). A stream not found yet is waited for: one just
        created may not be visible at once."""
        deadline = time.monotonic() + timeout_s
        while True:
            status = self.status(name)
            if status == StreamStatus.ACTIVE:
                return True
            if status == StreamStatus.DELETING or time.monotonic() >= deadline:
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
        """Put ``entries`` in order-preserving chunks; return the indices that failed (never raises per record).

        With a ``pacer`` the chunks are smaller and each waits until its shards may take it (catching up).
        """
        failed: list[int] = []
        chunks: Iterable[list[int]] = chunk_entries(entries)
        if self.pacer is not None:
            targets = [f"{name}/{e.explicit_hash_key}" for e in entries]
            sizes = [entry_size(e) for e in entries]
            chunks = self.pacer.chunks(targets, sizes, chunks)
        for chunk in chunks:
            if self.pacer is not None:
                self.pacer.wait(targets, sizes, chunk)
            batch = [{"Data": entries[i].data, "PartitionKey": entries[i].partition_key,
                      "ExplicitHashKey": entries[i].explicit_hash_key} for i in chunk]
            try:
                resp = self._k.put_records(StreamName=name, Records=batch)
            except ClientError as exc:
                failed += chunk
                self.throttled += len(chunk) if error_code(exc) in THROTTLED else 0
                continue
            codes = [r.get("ErrorCode") for r in resp["Records"]]
            failed += [i for i, code in zip(chunk, codes, strict=True) if code]
            self.throttled += sum(code in THROTTLED for code in codes)
        return failed


def entry_size(entry: PutEntry) -> int:
    """What a record counts against PutRecords' size limits: its data plus its partition key."""
    return len(entry.data) + len(entry.partition_key.encode())


def chunk_entries(entries: Sequence[PutEntry]) -> Iterable[list[int]]:
    """Indices of ``entries`` in order, in PutRecords-sized chunks (500 records, 5 MiB)."""
    chunk: list[int] = []
    size = 0
    for i, e in enumerate(entries):
        n = entry_size(e)
        if chunk and (len(chunk) >= KINESIS_MAX_RECORDS or size + n > KINESIS_MAX_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(i)
        size += n
    if chunk:
        yield chunk
