"""Shared plumbing of the Python Lambda functions: one code asset, one dependency layer, explicit log groups.

Every function: Python 3.14 on arm64, the shared code asset (``lambdas/`` + ``partitioner/``, local bundling),
the numpy/scipy/powertools layer (installed offline from the wheel cache), X-Ray tracing, its own log group
with the configured retention, and the common environment of docs/CONTRACTS.md.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from geokernel.contracts.env import EnvVar
from infra import assets
from infra.config import GeoConfig

RUNTIME = lambda_.Runtime.PYTHON_3_14
ARCHITECTURE = lambda_.Architecture.ARM_64


class LambdaKit(Construct):
    """Holds the shared code assets and ``layer``; :meth:`function` builds one configured function.

    One code asset per set of packages an entry point ships (:attr:`assets.EntryPoint.packages`): the router and
    the deploy functions share one with the kernel, the partitioner function's adds the library.
    """

    def __init__(self, scope: Construct, construct_id: str, *, config: GeoConfig) -> None:
        super().__init__(scope, construct_id)
        self._config = config
        self._code: dict[tuple[str, ...], lambda_.Code] = {}
        self.layer = lambda_.LayerVersion(
            self,
            "Deps",
            code=assets.layer_code(self),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description="numpy, scipy, aws-lambda-powertools (requirements-lambda.txt)",
        )

    def code(self, entry: assets.EntryPoint) -> lambda_.Code:
        """The code asset that ships ``entry``'s packages (made once per set of packages)."""
        if entry.packages not in self._code:
            self._code[entry.packages] = assets.lambda_code(entry.packages)
        return self._code[entry.packages]

    def function(
        self,
        scope: Construct,
        construct_id: str,
        *,
        entry: assets.EntryPoint,
        description: str,
        environment: Mapping[str, str],
        timeout: Duration,
        memory_mb: int = 512,
        dead_letter_queue: sqs.IQueue | None = None,
    ) -> lambda_.Function:
        log_group = logs.LogGroup(
            scope,
            f"{construct_id}Logs",
            retention=retention(self._config.log_retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )
        return lambda_.Function(
            scope,
            construct_id,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            code=self.code(entry),
            handler=assets.require(entry).handler,
            layers=[self.layer],
            description=description,
            # the function's own timeout, which its AWS clients' timeouts and retries fit in (lambdas/runtime/clients.py)
            environment={**environment, EnvVar.FUNCTION_TIMEOUT_S: str(int(timeout.to_seconds()))},
            timeout=timeout,
            memory_size=memory_mb,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=log_group,
            dead_letter_queue=dead_letter_queue,
        )


class ObjectCreatedFunction(Construct):
    """``function``: a :class:`LambdaKit` function invoked for each new object under ``prefix`` in ``bucket``;
    ``failures``: its dead-letter queue.

    S3 invokes it asynchronously; an event whose invocations all failed (Lambda retries an asynchronous invocation
    twice) would be dropped, so it goes to ``failures`` (KMS, TLS only, 14 days) instead
    (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-retain-records.html); the monitoring alarms on
    any message there.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        kit: LambdaKit,
        bucket: s3.IBucket,
        prefix: str,
        suffix: str | None = None,
        entry: assets.EntryPoint,
        description: str,
        environment: Mapping[str, str],
        timeout: Duration,
        memory_mb: int = 512,
    ) -> None:
        super().__init__(scope, construct_id)
        self.failures_key = kms.Key(self, "FailuresKey", description=f"{construct_id}: failed S3 events",
                                    enable_key_rotation=True)
        self.failures = sqs.Queue(self, "Failures", encryption=sqs.QueueEncryption.KMS,
                                  encryption_master_key=self.failures_key, enforce_ssl=True,
                                  retention_period=Duration.days(14))
        self.function: lambda_.Function = kit.function(
            self, "Function", entry=entry, description=description, environment=environment, timeout=timeout,
            memory_mb=memory_mb, dead_letter_queue=self.failures,
        )
        bucket.add_event_notification(
            s3.EventType.OBJECT_CREATED, s3n.LambdaDestination(self.function),
            s3.NotificationKeyFilter(prefix=prefix, suffix=suffix),
        )


_RETENTIONS = (
    (1, logs.RetentionDays.ONE_DAY), (3, logs.RetentionDays.THREE_DAYS), (5, logs.RetentionDays.FIVE_DAYS),
    (7, logs.RetentionDays.ONE_WEEK), (14, logs.RetentionDays.TWO_WEEKS), (30, logs.RetentionDays.ONE_MONTH),
    (60, logs.RetentionDays.TWO_MONTHS), (90, logs.RetentionDays.THREE_MONTHS), (180, logs.RetentionDays.SIX_MONTHS),
    (365, logs.RetentionDays.ONE_YEAR), (731, logs.RetentionDays.TWO_YEARS), (1827, logs.RetentionDays.FIVE_YEARS),
    (3653, logs.RetentionDays.TEN_YEARS),
)  # fmt: skip


def retention(days: int) -> logs.RetentionDays:
    """The smallest CloudWatch Logs retention (a fixed set of values) that keeps at least ``days``."""
    return next((value for limit, value in _RETENTIONS if limit >= days), _RETENTIONS[-1][1])
