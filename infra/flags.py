"""The CDK feature flags GeoRebalancer is built, tested and checked with (cdk-nag, cfn-lint, checkov).

A feature flag is an app-wide setting (cdk.json ``context``) that changes what a construct synthesizes: without
``@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy`` the access-logs bucket does not even synthesize, without
``@aws-cdk/aws-ec2:restrictDefaultSecurityGroup`` the VPC's default security group stays open, without
``@aws-cdk/aws-iam:minimizePolicies`` the template grows. The app's cdk.json sets exactly :data:`FEATURE_FLAGS`
(tests/infra/test_construct.py keeps the two equal); an app of yours that embeds the construct must set the same
values: :func:`check_feature_flags` stops the synth naming every flag that differs and how to set it.
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import FeatureFlags
from constructs import IConstruct

from infra.errors import ConfigError

#: The flags of the app's cdk.json, with their values.
FEATURE_FLAGS: dict[str, Any] = {
    "@aws-cdk/core:target-partitions": ['aws', 'aws-cn'],
    "@aws-cdk/aws-iam:minimizePolicies": True,
    "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True,
    "@aws-cdk/aws-s3:createDefaultLoggingPolicy": True,
    "@aws-cdk/aws-ec2:restrictDefaultSecurityGroup": True,
    "@aws-cdk/customresources:installLatestAwsSdkDefault": False,
    "@aws-cdk/aws-lambda:recognizeLayerVersion": True,
    "@aws-cdk/aws-lambda:recognizeVersionProps": True,
    "@aws-cdk/aws-ecs:arnFormatIncludesClusterName": True,
    "@aws-cdk/aws-ecs:disableExplicitDeploymentControllerForCircuitBreaker": True,
    "@aws-cdk/aws-kms:aliasNameRef": True,
    "@aws-cdk/aws-kms:reduceCrossAccountRegionPolicyScope": True,
    "@aws-cdk/aws-events:eventsTargetQueueSameAccount": True,
    "@aws-cdk/aws-iam:standardizedServicePrincipals": True,
    "@aws-cdk/aws-logs:uniqueLogGroupName": False,
    "@aws-cdk/core:enablePartitionLiterals": True,
    "@aws-cdk/core:validateSnapshotRemovalPolicy": True,
    "@aws-cdk/aws-s3:keepNotificationInImportedBucket": True,
    "@aws-cdk/aws-dynamodb:resourcePolicyPerReplica": True,
    "@aws-cdk/aws-sns:restrictSqsDescryption": True,
    "@aws-cdk/aws-lambda:useCdkManagedLogGroup": True,
    "@aws-cdk/aws-lambda-nodejs:useLatestRuntimeVersion": True,
    "@aws-cdk/aws-ec2:ebsDefaultGp3Volume": True,
    "@aws-cdk/aws-ecs:removeDefaultDeploymentAlarm": True,
    "@aws-cdk/aws-s3:setUniqueReplicationRoleName": True,
}


def check_feature_flags(scope: IConstruct) -> None:
    """Raise :class:`ConfigError` naming every boolean flag of :data:`FEATURE_FLAGS` whose value in ``scope``'s app
    differs (an unset flag has its CDK default)."""
    wrong = {flag: value for flag, value in FEATURE_FLAGS.items()
             if isinstance(value, bool) and FeatureFlags.of(scope).is_enabled(flag) is not value}
    if wrong:
        raise ConfigError(
            f"GeoRebalancer is built and checked with these CDK feature flags, which this app sets otherwise: "
            f"{json.dumps(wrong)}; add them to the context of your cdk.json (all of them: "
            "python -c 'import json, infra.flags; print(json.dumps(infra.flags.FEATURE_FLAGS, indent=2))')"
        )
