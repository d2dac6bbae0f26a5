"""The ingest stream and how the router starts reading it.

:class:`IngestStream` creates the stream (Kinesis on-demand or provisioned, encrypted with a customer-managed KMS key,
rotation on) when the deployment brings none of its own; :class:`IngestReading` is how the router reads whichever
stream it is: its retention (what the event source holds a failed record against), where the event source starts
and whether it reads through an enhanced fan-out consumer (docs/DEPLOY.md "Embedding the construct in your own
stack").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.config import GeoConfig
from infra.errors import ConfigError

#: How long the created ingest stream keeps a record (hours) by default: the router's event source holds records at
#: most this long, less REDRIVE_MARGIN_HOURS (infra/router.py)
INGEST_RETENTION_HOURS = 24
#: Kinesis keeps a record 24 hours to 365 days (https://docs.aws.amazon.com/streams/latest/dev/kinesis-extended-retention.html)
MIN_RETENTION_HOURS, MAX_RETENTION_HOURS = 24, 8760
_POSITIONS = {p.value: p for p in (lambda_.StartingPosition.TRIM_HORIZON, lambda_.StartingPosition.LATEST,
                                    lambda_.StartingPosition.AT_TIMESTAMP)}


def retention_hours(retention: Duration | None) -> int:
    """``retention`` in whole hours, within what Kinesis allows (:data:`INGEST_RETENTION_HOURS` when None)."""
    if retention is None:
        return INGEST_RETENTION_HOURS
    try:
        hours = int(retention.to_hours())
    except RuntimeError:  # jsii: a duration that is not a whole number of hours
        raise ConfigError(f"retention must be a whole number of hours, got {retention.to_human_string()}") from None
    if not MIN_RETENTION_HOURS <= hours <= MAX_RETENTION_HOURS:
        raise ConfigError(f"retention must be {MIN_RETENTION_HOURS} to {MAX_RETENTION_HOURS} hours (Kinesis), "
                          f"got {hours} hours")
    return hours


@dataclass(frozen=True, kw_only=True)
class IngestReading:
    """How the router's event source reads the ingest stream.

    ``retention_h``: how long the stream keeps a record (the created stream's retention; for a stream of your own,
    its retention as you set it: the construct cannot read it). ``starting_position``: where the event source starts
    on its first deploy (TRIM_HORIZON: every record the stream holds; LATEST: from its tip; AT_TIMESTAMP: from
    ``starting_timestamp``). ``fan_out``: read through an enhanced fan-out consumer of its own (a dedicated 2 MB/s per
    shard) instead of sharing the shards' read throughput with the stream's other readers.
    """

    retention_h: int = INGEST_RETENTION_HOURS
    starting_position: lambda_.StartingPosition = lambda_.StartingPosition.TRIM_HORIZON
    starting_timestamp: datetime | None = None
    fan_out: bool = False

    @classmethod
    def of(cls, *, own_stream: bool, retention: Duration | None = None,
           starting_position: lambda_.StartingPosition | None = None, starting_timestamp: datetime | None = None,
           fan_out: bool = False) -> IngestReading:
        """The reading of a created stream (``own_stream=False``: TRIM_HORIZON unless told, so nothing a producer sends
        before the first spec is lost) or of a stream of your own (LATEST unless told: TRIM_HORIZON would route up to
        the stream's retention of old records at the first deploy); an AT_TIMESTAMP start needs its timestamp."""
        default = lambda_.StartingPosition.LATEST if own_stream else lambda_.StartingPosition.TRIM_HORIZON
        position = starting_position or default
        if position.value not in _POSITIONS:
            raise ConfigError(f"starting_position must be one of {sorted(_POSITIONS)}, got {position.value!r}")
        if (position == lambda_.StartingPosition.AT_TIMESTAMP) != (starting_timestamp is not None):
            raise ConfigError("starting_timestamp is needed with starting_position AT_TIMESTAMP, and only with it "
                              f"(got {position.value} and {starting_timestamp!r})")
        if starting_timestamp is not None and starting_timestamp.tzinfo is None:
            raise ConfigError(f"starting_timestamp must be timezone-aware, got {starting_timestamp!r}")
        return cls(retention_h=retention_hours(retention), starting_position=position,
                   starting_timestamp=starting_timestamp, fan_out=fan_out)

    @property
    def timestamp_s(self) -> float | None:
        """``starting_timestamp`` as Unix seconds (the event source mapping's ``StartingPositionTimestamp``)."""
        return None if self.starting_timestamp is None else self.starting_timestamp.timestamp()


class IngestStream(Construct):
    """``stream`` (``<prefix>-ingest``) and its ``key``. Producers use ``entity_id`` as the partition key."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GeoConfig,
                 retention_h: int = INGEST_RETENTION_HOURS) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Key",
            description=f"{config.prefix}: ingest stream encryption",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY,
        )
        self.stream = kinesis.Stream(
            self,
            "Stream",
            # retained (retain_data): a generated name, so a redeploy after `cdk destroy` does not collide with it
            stream_name=None if config.retain_data else f"{config.prefix}-ingest",
            # ingest_shards=0: on-demand (pays per GB in and out); N > 0: provisioned N shards, cheaper for a steady
            # known rate (https://aws.amazon.com/kinesis/data-streams/pricing/; docs/COST.md)
            stream_mode=kinesis.StreamMode.PROVISIONED if config.ingest_shards else kinesis.StreamMode.ON_DEMAND,
            shard_count=config.ingest_shards or None,
            encryption=kinesis.StreamEncryption.KMS,
            encryption_key=self.key,
            retention_period=Duration.hours(retention_h),
        )
