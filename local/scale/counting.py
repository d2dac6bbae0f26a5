"""What the simulation adds to the call log beyond the clients it watches, and what it reads back from it.

The ECS agent's scale-in protection calls (:func:`protected`) and the router's counted-not-sent puts per shard
(:class:`ShardLookup`) are logged by hand; :func:`steady_output_puts` measures the workers' output PUT rate and
:func:`steady_calls` the AWS calls per event routed in the steady phase (all of them, and the state handoff's own).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Any

from geokernel.aws_budget.calls import CallLog
from geokernel.aws_budget.usage import ACCOUNT, Usage
from geokernel.contracts.enriched import EnrichedKey
from geokernel.contracts.handoff import router_ledger_key, state_key
from lambdas.runtime.kinesis import PutEntry
from local.scale.result import ScaleResult, SteadyCalls

#: Call-log rows that are levels, not calls (the router's concurrency, Fargate's launch tokens).
NOT_CALLS = frozenset({"lambda.concurrency", "fargate.task_launches"})


def is_call(key: str) -> bool:
    """True for a call-log row that counts calls (not units, records, bytes, retries already counted, or levels)."""
    return not ("_units." in key or key.endswith((".records", ".bytes")) or key.startswith("retries.")
                or key in NOT_CALLS)


def steady_calls(result: ScaleResult, specs_bucket: str, output_bucket: str) -> SteadyCalls | None:
    """AWS calls per simulated second in ``result``'s steady phase (None without one): all of them, and the state
    handoff's own (the router's ledger GETs and PUTs, the slots' state objects, the handoff items'
    ``BatchWriteItem``; its ``BatchGetItem`` calls share their row with the lease reads and show only in the
    total)."""
    steady = next((p for p in result.phases if p.name == "steady"), None)
    if steady is None or steady.end <= steady.start:
        return None
    lo, hi = result.sim_start + steady.start, result.sim_start + steady.end
    ledgers = f"{specs_bucket}/{router_ledger_key('', '').split('/')[0]}/"
    states = f"{output_bucket}/{state_key(0, '', final=False).split('/')[0]}/"
    total = state = 0.0
    for row in result.calls.series():
        if not is_call(row.key):
            continue
        n = sum(v for t, v in row.seconds.items() if lo <= t < hi)
        total += n
        if row.key == "dynamodb.BatchWriteItem" or (row.key in ("s3.get.prefix", "s3.put.prefix")
                                                    and row.scope.startswith((ledgers, states))):
            state += n
    span = hi - lo
    return SteadyCalls(total / span, state / span)


def steady_output_puts(result: ScaleResult, written: Iterable[EnrichedKey]) -> float | None:
    """Output objects written per slot per second in the steady phase (every slot serving, no swap), from the keys of
    the objects (``written``: each names its slot and its write time): the number of intervals between a slot's
    consecutive objects over their summed length (a window's edges would count a part of an interval as a whole
    one). All slots write to the same hour's folder, so the call log's per-prefix rows cannot tell them apart."""
    steady = next((p for p in result.phases if p.name == "steady"), None)
    if steady is None:
        return None
    lo, hi = (result.sim_start + steady.start) * 1000, (result.sim_start + steady.end) * 1000
    slots: dict[tuple[int, str], list[int]] = {}
    for key in written:
        if lo <= key.written_ms < hi:
            slots.setdefault((key.version, key.worker_id), []).append(key.written_ms)
    gaps, span = 0, 0.0
    for times in slots.values():
        if len(times) >= 2:
            gaps += len(times) - 1
            span += (max(times) - min(times)) / 1000
    return gaps / span if span else None


def protected(calls: CallLog) -> dict[str, object]:
    """The ECS agent's answer to a scale-in protection request (counted as the ECS call the agent makes for it)."""
    calls.add([Usage("ecs.UpdateTaskProtection", ACCOUNT, 1)])
    return {}


class ShardLookup:
    """The shard of each hash key of a geo stream (its shard list, read once per stream), so that the router's
    invocations that are counted rather than sent still count per shard (records and bytes)."""

    def __init__(self, kinesis: Any) -> None:
        self._kinesis = kinesis
        self._streams: dict[str, tuple[list[int], list[str]]] = {}

    def _ranges(self, stream: str) -> tuple[list[int], list[str]]:
        if stream not in self._streams:
            shards, token = [], {"StreamName": stream}
            while True:
                resp = self._kinesis.list_shards(**token)
                shards += [s for s in resp["Shards"] if "EndingSequenceNumber" not in s["SequenceNumberRange"]]
                if not resp.get("NextToken"):
                    break
                token = {"NextToken": resp["NextToken"]}
            shards.sort(key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))
            self._streams[stream] = ([int(s["HashKeyRange"]["StartingHashKey"]) for s in shards],
                                     [str(s["ShardId"]) for s in shards])
        return self._streams[stream]

    def count(self, calls: CallLog, stream: str, entries: list[PutEntry], at: float) -> None:
        """Count one PutRecords call of ``entries``: records and bytes summed per hash key first, then per shard
        (a call's few hundred records go to far fewer keys; the totals are the same as counting each record)."""
        starts, ids = self._ranges(stream)
        per_key: dict[str, list[int]] = {}
        for e in entries:
            acc = per_key.get(e.explicit_hash_key)
            if acc is None:
                acc = per_key[e.explicit_hash_key] = [0, 0]
            acc[0] += 1
            acc[1] += len(e.data) + len(e.partition_key)
        per_shard: dict[str, list[int]] = {}
        for key, (n, size) in per_key.items():
            shard = f"{stream}/{ids[bisect.bisect_right(starts, int(key)) - 1]}"
            acc = per_shard.setdefault(shard, [0, 0])
            acc[0] += n
            acc[1] += size
        found = [Usage("kinesis.PutRecords", ACCOUNT, 1)]
        for shard, (n, size) in per_shard.items():
            found += [Usage("kinesis.PutRecords.records", shard, n), Usage("kinesis.PutRecords.bytes", shard, size)]
        calls.add(found, at=at)
