"""S3 buckets: snapshots, specs, checkpoints, quarantine, cost reports, enriched output, plus the
server-access-logs bucket they all log to.

Every data bucket is versioned (an overwrite or a delete keeps the previous version: the specs are the record of
what ran, a snapshot or checkpoint overwritten by a bad write can be recovered), with a lifecycle rule that expires
noncurrent versions (``NONCURRENT_DAYS``; the checkpoints, rewritten every micro-batch, after one day).

Every data bucket: SSE-KMS with one customer-managed key (bucket keys on), TLS-only (enforceSSL), all public
access blocked, access logs, lifecycle rules. The access-logs bucket uses SSE-S3 (S3 log delivery cannot
write with a KMS key). The quarantine bucket has an S3 request-metrics filter on ``quarantine/`` that the
dashboard's quarantine-rate alarm reads (AWS/S3 PutRequests, FilterId ``QuarantineWrites``).

The output bucket may be the deployment's own (``output``: an ``IBucket`` the construct is given,
docs/DEPLOY.md "Embedding the construct in your own stack"): then none is created here, and its encryption, versioning,
lifecycle and logging are its owner's.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import GeoConfig

QUARANTINE_METRICS_FILTER = "QuarantineWrites"
NONCURRENT_DAYS = {"Specs": 90, "Checkpoints": 1}  # others: 7
_ABORT_UPLOADS = s3.LifecycleRule(id="abort-incomplete-uploads", abort_incomplete_multipart_upload_after=Duration.days(7))
_TIER_ENRICHED = s3.LifecycleRule(
    id="tier-enriched",
    prefix="enriched/",
    transitions=[s3.Transition(storage_class=s3.StorageClass.INFREQUENT_ACCESS, transition_after=Duration.days(30))],
    expiration=Duration.days(365),
)


class Storage(Construct):
    """Buckets as attributes: ``snapshots``, ``specs``, ``checkpoints``, ``quarantine``, ``costs``, ``output`` (the one
    given, else created), ``access_logs``; the data-bucket KMS ``key``."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GeoConfig, output: s3.IBucket | None = None) -> None:
        super().__init__(scope, construct_id)
        self._retain = config.retain_data
        removal = RemovalPolicy.RETAIN if config.retain_data else RemovalPolicy.DESTROY
        self.key = kms.Key(
            self, "Key", description=f"{config.prefix}: data buckets", enable_key_rotation=True, removal_policy=removal
        )
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[_ABORT_UPLOADS, s3.LifecycleRule(id="expire-logs", expiration=Duration.days(90))],
            removal_policy=removal,
            auto_delete_objects=not config.retain_data,
        )
        self.snapshots = self._bucket(
            "Snapshots", [s3.LifecycleRule(id="expire-snapshots", prefix="snapshots/", expiration=Duration.days(7))]
        )
        self.specs = self._bucket("Specs", [])
        self.checkpoints = self._bucket("Checkpoints", [])
        self.quarantine = self._bucket(
            "Quarantine",
            [s3.LifecycleRule(id="expire-quarantine", prefix="quarantine/", expiration=Duration.days(30))],
            metrics=[s3.BucketMetrics(id=QUARANTINE_METRICS_FILTER, prefix="quarantine/")],
        )
        self.costs = self._bucket(
            "Costs", [s3.LifecycleRule(id="expire-cost-reports", prefix="costs/", expiration=Duration.days(30))]
        )
        self.output: s3.IBucket = output if output is not None else self._bucket("Output", [_TIER_ENRICHED])

    def _bucket(
        self,
        construct_id: str,
        rules: list[s3.LifecycleRule],
        *,
        metrics: list[s3.BucketMetrics] | None = None,
    ) -> s3.Bucket:
        noncurrent = s3.LifecycleRule(
            id="expire-noncurrent", noncurrent_version_expiration=Duration.days(NONCURRENT_DAYS.get(construct_id, 7))
        )
        return s3.Bucket(
            self,
            construct_id,
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            lifecycle_rules=[_ABORT_UPLOADS, noncurrent, *rules],
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix=f"{construct_id.lower()}/",
            metrics=metrics,
            removal_policy=RemovalPolicy.RETAIN if self._retain else RemovalPolicy.DESTROY,
            auto_delete_objects=not self._retain,
        )

    @property
    def data_buckets(self) -> dict[str, s3.IBucket]:
        return {
            "Snapshots": self.snapshots,
            "Specs": self.specs,
            "Checkpoints": self.checkpoints,
            "Quarantine": self.quarantine,
            "Costs": self.costs,
            "Output": self.output,
        }
