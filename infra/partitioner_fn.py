"""The partitioner Lambda: on each load-snapshot manifest (S3 ObjectCreated ``snapshots/**/_manifest.json``) it
builds a candidate spec, applies the rebalance policy and publishes ``specs/v<version:08d>.json``; on each router's
surge signal (``control/surge/**.json`` in the specs bucket) it publishes a relief (the fast path)."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from constructs import Construct

from geokernel.contracts.snapshot import MANIFEST_NAME, SNAPSHOTS_PREFIX
from geokernel.contracts.surge import SIGNAL_PREFIX
from infra import assets
from infra.functions import LambdaKit, ObjectCreatedFunction

# bench/bench_partitioner_handler.py measured 2,435 MB peak at 4M quadkeys / 1,134 workers on a first window, and
# 2,945 MB on a growing window (a 30 % rise: a forecast overload, a sticky candidate, 372 -> 681 workers): 4,096 MB
# leaves 28 % headroom (at least 25 % is kept, so a bigger snapshot than the benchmark's does not run the function
# out of memory); Lambda allots CPU in proportion to memory, so the build also runs faster.
PARTITIONER_TIMEOUT = Duration.minutes(5)
PARTITIONER_MEMORY_MB = 4096


class PartitionerFunction(ObjectCreatedFunction):
    """``function`` (handler ``lambdas/partitioner/handler.py:handler``), triggered by the snapshots bucket's manifests
    and the specs bucket's surge signals (``signals``; the same dead-letter queue takes both kinds of failure)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        kit: LambdaKit,
        snapshots: s3.IBucket,
        signals: s3.IBucket,
        environment: Mapping[str, str],
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            kit=kit,
            bucket=snapshots,
            prefix=SNAPSHOTS_PREFIX,
            suffix=MANIFEST_NAME,
            entry=assets.PARTITIONER_HANDLER,
            description="Builds and publishes a partition spec from each load snapshot",
            environment=environment,
            timeout=PARTITIONER_TIMEOUT,
            memory_mb=PARTITIONER_MEMORY_MB,
        )
        signals.add_event_notification(s3.EventType.OBJECT_CREATED, s3n.LambdaDestination(self.function),
                                       s3.NotificationKeyFilter(prefix=SIGNAL_PREFIX, suffix=".json"))
