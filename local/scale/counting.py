"""What the simulation adds to the call log beyond the clients it watches, and what it reads back from it.

The ECS agent's scale-in protection calls (:func:`protected`) and the router's counted-not-sent puts per shard
(:class:`ShardLookup`) are logged by hand; :func:`steady_output_puts` measures the workers' output PUT rate.
"""

from __future__ import annotations

import bisect
from typing import Any

from lambdas.common.kinesis import PutEntry
from local.scale.result import ScaleResult
from partitioner.aws_budget.calls import CallLog
from partitioner.aws_budget.usage import ACCOUNT, Usage


def steady_output_puts(result: ScaleResult, output_bucket: str) -> float | None:
    """Output objects written per slot per second in the steady phase (every slot serving, no swap): the number of
    intervals between a slot's consecutive objects over their summed length (a window's edges would count a part
    of an interval as a whole one). Calls are logged in whole seconds, so an interval reads 1 s short or long."""
    steady = next((p for p in result.phases if p.name == "steady"), None)
    if steady is None:
        return None
    lo, hi = result.sim_start + steady.start, result.sim_start + steady.end
    gaps, span = 0, 0.0
    for row in result.calls.series():
        if row.key == "s3.put.prefix" and row.scope.startswith(f"{output_bucket}/"):
            times = sorted(t for t in row.seconds if lo <= t < hi)
            if len(times) >= 2:
                gaps += sum(int(row.seconds[t]) for t in times) - 1
                span += times[-1] - times[0]
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
        starts, ids = self._ranges(stream)
        found = [Usage("kinesis.PutRecords", ACCOUNT, 1)]
        for e in entries:
            shard = f"{stream}/{ids[bisect.bisect_right(starts, int(e.explicit_hash_key)) - 1]}"
            size = len(e.data) + len(e.partition_key)
            found += [Usage("kinesis.PutRecords.records", shard, 1), Usage("kinesis.PutRecords.bytes", shard, size)]
        calls.add(found, at=at)
