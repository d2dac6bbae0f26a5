"""The router's ledger of one ingest shard (``STATE_HANDOFF=1``), kept in S3 and inherited across a reshard.

For each entity the ledger holds its last routed event: the number ``n`` the router gave it, its place in the ingest
shard and the slot it went to (:mod:`lambdas.router.stateful` stamps and marks with it). It lives at
:func:`~geokernel.contracts.handoff.router_ledger_key` in the specs bucket, one object per ingest shard.

**Resharding.** An on-demand ingest stream (``ingest_shards`` 0, the default) splits and merges shards by itself,
and an entity's events then go to a child shard. A shard whose ledger does not exist yet starts from its parents'
ledgers (``ParentShardId``, ``AdjacentParentShardId`` from ``ListShards``), keeping the entities whose partition
keys hash into the child's range, so their numbers go on instead of starting again at 1 (which the workers would skip
as copies). That is exact as long as a parent's last batch is routed before its child's first: the event source
mapping keeps an entity's records in order (https://docs.aws.amazon.com/lambda/latest/dg/with-kinesis.html), which
across a reshard means reading a parent to its end before its children, as the KCL does
(https://docs.aws.amazon.com/streams/latest/dev/kinesis-using-sdk-java-after-resharding.html).
``ListShards`` is called once per container for a shard with no ledger (1,000 calls/s per stream:
https://docs.aws.amazon.com/kinesis/latest/APIReference/API_ListShards.html).

**Execution environments.** The router's invocations for one shard run one at a time, but not always in the same
execution environment: environments serve every shard of the function, and Lambda says to assume an environment
lives for one invocation and to keep no counters across invocations in it
(https://docs.aws.amazon.com/lambda/latest/operatorguide/statelessness-functions.html). A ledger cached in one
environment is stale once another environment routed the shard and saved: stamping from it would give numbers the
workers already applied, and they would skip those events as copies. So :meth:`LedgerStore.load` asks S3 for the
ledger on every invocation with ``If-None-Match: <ETag of the cached copy>`` (a ``304 Not Modified`` costs one GET
request and keeps the cache), and :meth:`LedgerStore.save` writes with ``If-Match: <that ETag>`` (``If-None-Match: *``
for a shard's first ledger): a ledger some other invocation wrote meanwhile fails the save with
``412 Precondition Failed`` instead of being overwritten
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html,
https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html). Two calls per invocation that routed anything.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from geokernel.contracts.handoff import router_ledger_key
from geokernel.contracts.stream import ShardRange, partition_hash_key
from lambdas.runtime.clients import error_code
from lambdas.runtime.errors import AdapterError

#: The shards of an ingest stream by id (``ListShards``), asked for only when a shard has no ledger yet.
ShardLister = Callable[[str], Sequence[ShardRange]]


@dataclass(frozen=True, slots=True)
class Target:
    """Where an event goes: the geo stream, the ExplicitHashKey of its shard and the slot's label."""

    stream: str
    hash_key: str
    label: str


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """An entity's last routed event: its number, its place in the ingest shard, and where it went."""

    n: int
    order: tuple[int, int]
    target: Target


class RouterLedger:
    """Each entity's :class:`LedgerEntry` for one ingest shard; ``dirty`` once it changed since it was saved."""

    def __init__(self, entries: dict[str, LedgerEntry] | None = None) -> None:
        self.entries: dict[str, LedgerEntry] = entries or {}
        self.dirty = False
        #: each entity's entry before the batch under way changed it (None: it had none): :meth:`rollback`
        self._before: dict[str, LedgerEntry | None] = {}
        #: Geo streams found deleted (not saved): markers to them are skipped without a call.
        self.gone_streams: set[str] = set()

    def begin_batch(self) -> None:
        """Start a batch: :meth:`rollback` undoes what :meth:`record` changes from here on."""
        self._before = {}

    def record(self, entity_id: str, entry: LedgerEntry) -> None:
        """Set ``entity_id``'s entry (keeping the one before it for :meth:`rollback`)."""
        if entity_id not in self._before:
            self._before[entity_id] = self.entries.get(entity_id)
        self.entries[entity_id] = entry
        self.dirty = True

    def rollback(self) -> None:
        """Undo every :meth:`record` since :meth:`begin_batch` (the flip fence failed the batch: its records are
        routed afresh when re-delivered). Costs the entities the batch touched, not the ledger's size."""
        for entity_id, entry in self._before.items():
            if entry is None:
                self.entries.pop(entity_id, None)
            else:
                self.entries[entity_id] = entry
        self.dirty = self.dirty or bool(self._before)
        self._before = {}

    def to_json(self) -> str:
        """``{"targets": [[stream, hash_key, label], ...], "entities": {entity: [n, seq, sub, target index]}}``:
        the few targets once, each entity as four numbers (a third of the bytes of a row with its target's names)."""
        index: dict[Target, int] = {}
        rows = {e: [x.n, x.order[0], x.order[1], index.setdefault(x.target, len(index))]
                for e, x in self.entries.items()}
        targets = [[t.stream, t.hash_key, t.label] for t in index]
        return json.dumps({"targets": targets, "entities": rows}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, where: str) -> RouterLedger:
        """A ledger from :meth:`to_json`, or from the earlier layout (each row with its target's three names)."""
        try:
            data: Any = json.loads(text)
            rows: Any = data["entities"]
            if "targets" not in data:
                return cls({str(e): LedgerEntry(int(r[0]), (int(r[1]), int(r[2])),
                                                Target(str(r[3]), str(r[4]), str(r[5]))) for e, r in rows.items()})
            targets = [Target(str(t[0]), str(t[1]), str(t[2])) for t in data["targets"]]
            return cls({str(e): LedgerEntry(int(r[0]), (int(r[1]), int(r[2])), targets[int(r[3])])
                        for e, r in rows.items()})
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise AdapterError(f"router ledger {where!r} is not a ledger: {exc}") from None


def inherit(child: ShardRange, parents: Sequence[RouterLedger]) -> RouterLedger:
    """The ledger a new shard starts with: its parents' entries for the entities whose hash keys it holds.

    Notes
    -----
    An entry's place is reset to ``(0, 0)``: every record of the child is newer than the parent's, and sequence
    numbers of different shards do not compare. An entity in two parents (not possible for siblings, whose ranges
    are disjoint) keeps its higher number. The result is ``dirty`` when it holds anything, so it is saved.
    """
    entries: dict[str, LedgerEntry] = {}
    for ledger in parents:
        for entity, entry in ledger.entries.items():
            have = entries.get(entity)
            if child.holds(partition_hash_key(entity)) and (have is None or entry.n > have.n):
                entries[entity] = LedgerEntry(entry.n, (0, 0), entry.target)
    out = RouterLedger(entries)
    out.dirty = bool(entries)
    return out


@dataclass(frozen=True, slots=True)
class _Copy:
    """A ledger as one environment holds it, and the ETag of the S3 object it equals (None: never stored)."""

    ledger: RouterLedger
    etag: str | None


class LedgerStore:
    """Router ledgers in S3, each checked against S3 on every load (see the module docstring), parsed only when changed.

    ``list_shards`` (optional) lists an ingest stream's shards: a shard with no ledger then inherits its parents'.
    """

    def __init__(self, s3: Any, bucket: str, list_shards: ShardLister | None = None, *,
                 clock: Callable[[], float] = time.time) -> None:
        self._s3 = s3
        self._clock = clock
        self.bucket = bucket
        self._list_shards = list_shards
        self._shards: dict[str, dict[str, ShardRange]] = {}  # per stream, listed once (again for an unknown shard)
        self._cache: dict[str, _Copy] = {}  # by key: the ledger and the ETag it was read or saved as
        self.saves = 0  # PutObject calls made (the local report's extra calls per event)
        self.reads = 0  # GetObject calls made for the shards routed (304 Not Modified included)
        self.seconds: Counter[int] = Counter()  # reads and saves per whole second of ``clock``
        self.inherited = 0  # ledgers started from their parents'
        #: Geo streams this environment found deleted, shared by every ledger it loads (a ledger read anew from S3
        #: must not check them again: ``DescribeStreamSummary`` has 20 calls/s per account).
        self.gone_streams: set[str] = set()

    def load(self, stream: str, shard_id: str) -> RouterLedger:
        """The ledger of ``shard_id`` of ingest stream ``stream`` as last saved by anyone: cached if S3 still holds
        that copy, else stored, inherited or empty."""
        key = router_ledger_key(stream, shard_id)
        cached = self._cache.get(key)
        got = self._read(key, None if cached is None else cached.etag)
        if got is _NOT_MODIFIED and cached is not None:
            return cached.ledger
        if isinstance(got, _Copy):
            self._cache[key] = got
        elif cached is None or cached.etag is not None:  # none stored (or it was deleted): start or inherit
            self._cache[key] = _Copy(self._start(stream, shard_id, set()), None)
        ledger = self._cache[key].ledger
        ledger.gone_streams = self.gone_streams
        return ledger

    def _read(self, key: str, etag: str | None) -> _Copy | object | None:
        """The stored ledger and its ETag, :data:`_NOT_MODIFIED` if it is still ``etag``, or None if none is stored."""
        kw: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if etag is not None:
            kw["IfNoneMatch"] = etag
        self.reads += 1
        self.seconds[int(self._clock())] += 1
        try:
            resp = self._s3.get_object(**kw)
        except ClientError as exc:
            code = error_code(exc)
            if code in ("304", "NotModified"):
                return _NOT_MODIFIED
            if code in ("NoSuchKey", "404", "NotFound"):
                return None
            raise AdapterError(f"cannot read router ledger s3://{self.bucket}/{key}: {exc}") from exc
        return _Copy(RouterLedger.from_json(resp["Body"].read().decode(), f"s3://{self.bucket}/{key}"), resp.get("ETag"))

    def _stored(self, stream: str, shard_id: str) -> RouterLedger | None:
        """The ledger saved for a parent shard, or None if there is none."""
        got = self._read(router_ledger_key(stream, shard_id), None)
        return got.ledger if isinstance(got, _Copy) else None

    def save(self, stream: str, shard_id: str, ledger: RouterLedger) -> None:
        """Write ``ledger`` if it changed, only over the copy it was loaded from (:class:`AdapterError` otherwise)."""
        if not ledger.dirty:
            return
        key = router_ledger_key(stream, shard_id)
        cached = self._cache.get(key)
        etag = cached.etag if cached is not None and cached.ledger is ledger else None
        cond = {"IfMatch": etag} if etag is not None else {"IfNoneMatch": "*"}
        self.saves += 1
        self.seconds[int(self._clock())] += 1
        try:
            resp = self._s3.put_object(Bucket=self.bucket, Key=key, Body=ledger.to_json().encode(),
                                       ContentType="application/json", **cond)
        except ClientError as exc:
            self._cache.pop(key, None)  # reload what was saved last: the batch is retried and re-stamped alike
            if error_code(exc) in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                raise AdapterError(f"router ledger s3://{self.bucket}/{key} was written by another invocation "
                                   f"while this one routed the shard (router_parallelism must be 1)") from exc
            raise AdapterError(f"cannot save router ledger s3://{self.bucket}/{key}: {exc}") from exc
        self._cache[key] = _Copy(ledger, resp.get("ETag"))
        ledger.dirty = False

    def _start(self, stream: str, shard_id: str, seen: set[str]) -> RouterLedger:
        """A shard with no stored ledger: its parents' (each stored, or started the same way), or empty."""
        shard = self._shard(stream, shard_id)
        if shard is None or not shard.parents or shard_id in seen:
            return RouterLedger()
        seen.add(shard_id)
        parents = [self._stored(stream, p) or self._start(stream, p, seen) for p in shard.parents]
        ledger = inherit(shard, parents)
        self.inherited += bool(ledger.entries)
        return ledger

    def _shard(self, stream: str, shard_id: str) -> ShardRange | None:
        if self._list_shards is None:
            return None
        known: Mapping[str, ShardRange] = self._shards.get(stream, {})
        if shard_id not in known:
            known = self._shards[stream] = {s.shard_id: s for s in self._list_shards(stream)}
        return known.get(shard_id)


#: What :meth:`LedgerStore._read` returns for ``304 Not Modified``.
_NOT_MODIFIED = object()
