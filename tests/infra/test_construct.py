"""infra.rebalancer: GeoRebalancer embedded in a user's own Stack (bring your own stream and output bucket, a transform
package or an image of your own), and the app's stack holding it under the id Default."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks

from infra.assets import AssetError, require_sources
from infra.config import load_config
from infra.errors import ConfigError
from infra.flags import FEATURE_FLAGS
from infra.ingest import IngestReading
from infra.rebalancer import GeoRebalancer
from infra.router import max_record_age
from infra.worker_transform import TRANSFORM_PACKAGE_ARG, WorkerTransform
from local.wiring.template import OUTPUT_NAMES

ACCOUNT, REGION = "111111111111", "eu-west-1"
STREAM_ARN = f"arn:aws:kinesis:{REGION}:{ACCOUNT}:stream/clicks"
KEY_ARN = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
WORKER_IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/my-geo-worker:1.4"
PACKAGE = "my-transforms==1.2.0"


@dataclass(frozen=True)
class Embedded:
    stack: cdk.Stack
    rebalancer: GeoRebalancer
    template: Template
    assets: dict[str, Any]

    def role_statements(self, service: str) -> list[dict[str, Any]]:
        """The identity statements of the roles ``service`` assumes (``lambda``, ``emr-serverless``, ...)."""
        roles = {k for k, r in self.template.find_resources("AWS::IAM::Role").items()
                 if f"{service}.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])}
        return [s for p in self.template.find_resources("AWS::IAM::Policy").values()
                if {r.get("Ref") for r in p["Properties"]["Roles"]} & roles
                for s in p["Properties"]["PolicyDocument"]["Statement"]]


def embed(tmp: Path, parts: Callable[[cdk.Stack], dict[str, Any]], *, nag: bool = False) -> Embedded:
    """A user's Stack holding a GeoRebalancer (id ``GeoRebalancer``) with the arguments ``parts`` makes in it; assets
    not bundled (as the local twin synthesizes), cdk-nag's AwsSolutions checks as in app.py when ``nag``."""
    app = cdk.App(context={**FEATURE_FLAGS, "aws:cdk:bundling-stacks": []}, outdir=str(tmp))
    stack = cdk.Stack(app, "UserStack", env=cdk.Environment(account=ACCOUNT, region=REGION))
    rebalancer = GeoRebalancer(stack, "GeoRebalancer", config=load_config({"prefix": "userrebal"}), **parts(stack))
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True, write_suppressions_to_cloud_formation=False))
    assembly = app.synth()  # raises on an unacknowledged cdk-nag error
    manifest = json.loads((Path(assembly.directory) / f"{stack.artifact_id}.assets.json").read_text())
    return Embedded(stack, rebalancer, Template.from_stack(stack), manifest)


@pytest.fixture(scope="module")
def by_arn(tmp_path_factory: pytest.TempPathFactory) -> Embedded:
    """A stream imported by ARN (defaults otherwise), a user output bucket, a transform package."""
    return embed(tmp_path_factory.mktemp("embed-arn"), lambda stack: {
        "ingest_stream": kinesis.Stream.from_stream_arn(stack, "Clicks", STREAM_ARN),
        "output_bucket": s3.Bucket.from_bucket_name(stack, "Enriched", "my-enriched-records"),
        "transform": WorkerTransform.from_package(PACKAGE, "my_transforms.zones:Zones"),
    })


@pytest.fixture(scope="module")
def encrypted(tmp_path_factory: pytest.TempPathFactory) -> Embedded:
    """A stream encrypted with its own key (imported with it), read from a timestamp through an enhanced fan-out
    consumer, 7 days' retention, a worker image of the user's; cdk-nag on."""
    return embed(tmp_path_factory.mktemp("embed-key"), lambda stack: {
        "ingest_stream": kinesis.Stream.from_stream_attributes(
            stack, "Clicks", stream_arn=STREAM_ARN, encryption_key=kms.Key.from_key_arn(stack, "ClicksKey", KEY_ARN)),
        "retention": cdk.Duration.days(7),
        "starting_position": lambda_.StartingPosition.AT_TIMESTAMP,
        "starting_timestamp": datetime(2026, 1, 5, 12, 0, tzinfo=UTC),
        "router_fan_out": True,
        "transform": WorkerTransform.from_image(ecs.ContainerImage.from_registry(WORKER_IMAGE)),
    }, nag=True)


def _grants(statements: list[dict[str, Any]], action: str, resource: Any) -> bool:
    for s in statements:
        actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
        if action in actions and resource in resources:
            return True
    return False


def test_a_stream_of_your_own_is_read_and_none_is_created(by_arn: Embedded) -> None:
    # GIVEN the construct in a user's stack on a stream imported with Stream.from_stream_arn
    template = by_arn.template
    # THEN the stack creates no ingest stream (nor its key)
    template.resource_count_is("AWS::Kinesis::Stream", 0)
    assert not [k for k in template.find_resources("AWS::KMS::Key")
                if "ingest" in json.dumps(template.to_json()["Resources"][k]).lower()]
    # AND the router's event source reads the imported ARN from its tip (LATEST: no re-routing of what the stream
    # already holds), holding a failing record for the default 24 h retention less 6 h
    template.has_resource_properties("AWS::Lambda::EventSourceMapping", {
        "EventSourceArn": STREAM_ARN, "StartingPosition": "LATEST", "MaximumRecordAgeInSeconds": 18 * 3600,
        "FunctionName": {"Ref": Match.string_like_regexp("^GeoRebalancerRouterFunction")}})
    # AND the router's and the Spark job's roles read that stream (and no key: none was given)
    for service in ("lambda", "emr-serverless"):
        assert _grants(by_arn.role_statements(service), "kinesis:GetRecords", STREAM_ARN), service
    assert not [s for s in by_arn.role_statements("emr-serverless") if "kms:Decrypt" in json.dumps(s["Action"])
                and KEY_ARN in json.dumps(s)]
    # AND the job reads it by name, and the operator output names it
    assert "clicks" in json.dumps(template.find_resources("Custom::EmrServerlessStreamingJobRun"))
    assert template.to_json()["Outputs"]["IngestStreamName"]["Value"] == "clicks"


def test_an_encrypted_stream_of_your_own_gives_the_readers_kms_decrypt_on_its_key(encrypted: Embedded) -> None:
    # GIVEN a stream imported with from_stream_attributes(encryption_key=Key.from_key_arn(...))
    # THEN the router's role and the Spark job's role may decrypt with that key (and read the stream)
    for service in ("lambda", "emr-serverless"):
        statements = encrypted.role_statements(service)
        assert _grants(statements, "kms:Decrypt", KEY_ARN), service
        assert _grants(statements, "kinesis:GetRecords", STREAM_ARN), service
    encrypted.template.resource_count_is("AWS::Kinesis::Stream", 0)


def test_the_router_can_read_through_an_enhanced_fan_out_consumer_from_a_timestamp(encrypted: Embedded) -> None:
    # GIVEN router_fan_out, AT_TIMESTAMP and a 7-day retention
    template = encrypted.template
    # THEN a stream consumer of the router's own is registered on the imported stream
    template.has_resource_properties("AWS::Kinesis::StreamConsumer",
                                     {"StreamARN": STREAM_ARN, "ConsumerName": "userrebal-router"})
    # AND the event source reads it from the timestamp, holding a failing record the 7 days' retention less 6 h
    template.has_resource_properties("AWS::Lambda::EventSourceMapping", {
        "EventSourceArn": {"Fn::GetAtt": [Match.string_like_regexp("^GeoRebalancerRouterConsumer"), "ConsumerARN"]},
        "StartingPosition": "AT_TIMESTAMP",
        "StartingPositionTimestamp": datetime(2026, 1, 5, 12, 0, tzinfo=UTC).timestamp(),
        "MaximumRecordAgeInSeconds": (7 * 24 - 6) * 3600})
    # (a longer retention is held 7 days, the event source's most: infra.router.max_record_age)
    assert max_record_age(365 * 24).to_seconds() == 7 * 86400 == max_record_age(7 * 24 + 6).to_seconds()
    # AND the router may subscribe to the shards through it
    consumer = {"Fn::GetAtt": [Match.string_like_regexp("^GeoRebalancerRouterConsumer"), "ConsumerARN"]}
    template.has_resource_properties("AWS::IAM::Policy", {"PolicyDocument": {"Statement": Match.array_with([
        Match.object_like({"Action": Match.array_with(["kinesis:SubscribeToShard"]), "Resource": consumer})])}})


def test_a_user_output_bucket_gets_the_enriched_records(by_arn: Embedded) -> None:
    # GIVEN output_bucket=Bucket.from_bucket_name(..., "my-enriched-records")
    template = by_arn.template
    # THEN the stack creates five data buckets and the access-logs bucket, no output bucket of its own
    assert len(template.find_resources("AWS::S3::Bucket")) == 6
    # AND the workers write there, the output names it
    worker = json.dumps(by_arn.role_statements("ecs-tasks"))
    assert "my-enriched-records/*" in worker
    assert template.to_json()["Outputs"]["OutputBucket"]["Value"] == "my-enriched-records"
    template.has_resource_properties("AWS::ECS::TaskDefinition", {"ContainerDefinitions": [Match.object_like({
        "Environment": Match.array_with([{"Name": "OUTPUT_BUCKET", "Value": "my-enriched-records"}])})]})


def test_a_transform_package_is_a_build_argument_of_the_bundled_image(by_arn: Embedded) -> None:
    # GIVEN WorkerTransform.from_package("my-transforms==1.2.0", "my_transforms.zones:Zones")
    # THEN the bundled Dockerfile builds the image with the requirement as its TRANSFORM_PACKAGE argument
    (image,) = by_arn.assets["dockerImages"].values()
    assert image["source"]["dockerFile"] == "geo_service/Dockerfile"
    assert image["source"]["dockerBuildArgs"] == {TRANSFORM_PACKAGE_ARG: PACKAGE}
    # AND the workers run its class
    by_arn.template.has_resource_properties("AWS::ECS::TaskDefinition", {"ContainerDefinitions": [Match.object_like({
        "Environment": Match.array_with([{"Name": "GEO_TRANSFORM", "Value": "my_transforms.zones:Zones"}])})]})


def test_an_image_of_your_own_replaces_the_bundled_one(encrypted: Embedded) -> None:
    # GIVEN WorkerTransform.from_image(ContainerImage.from_registry(...))
    # THEN no image is built, the task runs the user's image with the worker's health check, and the default transform
    assert not encrypted.assets.get("dockerImages")
    encrypted.template.has_resource_properties("AWS::ECS::TaskDefinition", {"ContainerDefinitions": [Match.object_like({
        "Image": WORKER_IMAGE,
        "HealthCheck": Match.object_like({"Command": ["CMD", "python", "-m", "geo_service.healthcheck"]})})]})
    (task,) = encrypted.template.find_resources("AWS::ECS::TaskDefinition").values()
    names = {e["Name"] for e in task["Properties"]["ContainerDefinitions"][0]["Environment"]}
    assert "GEO_TRANSFORM" not in names


def test_outputs_keep_their_keys_and_acknowledgements_stay_inside_the_construct(encrypted: Embedded) -> None:
    # GIVEN the construct under the id GeoRebalancer in a user's stack (cdk-nag ran in the fixture's synth)
    outputs = encrypted.template.to_json()["Outputs"]
    # THEN the outputs the operator's tools and the local loop read have their fixed keys
    assert set(OUTPUT_NAMES) <= set(outputs)
    # AND every logical id but the stack-level singletons' carries the construct's id
    resources = encrypted.template.to_json()["Resources"]
    assert [k for k in resources if not k.startswith("GeoRebalancer")] == [
        k for k in resources if k.startswith(("BucketNotificationsHandler", "AWS679f53fac002430cb0da5b7982bd2287",
                                              "CustomVpcRestrictDefaultSG"))]
    # AND no acknowledgement is scoped to the user's stack itself
    acks = [e.data for e in encrypted.stack.node.metadata if e.type == "geo-rebalancer:acknowledgement"]
    assert acks and all(a["path"] != "UserStack" for a in acks)


def test_the_apps_stack_holds_the_construct_under_default_so_logical_ids_stay(emr: Any) -> None:
    # GIVEN the app's stack (infra/stack.py)
    stack = emr.stack
    # THEN its construct is "Default", which CDK leaves out of logical ids: the parts keep the ids of 0.1.0
    assert stack.rebalancer.node.id == "Default"
    resources = emr.template.to_json()["Resources"]
    assert not [k for k in resources if k.startswith("Default")]
    assert {"RouterFunction0F681190", "WorkersTask1C05703B", "NetworkVpc7FB7348F"} <= set(resources)
    assert set(OUTPUT_NAMES) <= set(emr.template.to_json()["Outputs"])


def test_reading_defaults_by_whose_stream_it_is_and_rejects_an_unusable_start() -> None:
    # GIVEN no explicit start WHEN read THEN a created stream is read from TRIM_HORIZON, a stream of your own from LATEST
    assert IngestReading.of(own_stream=False).starting_position == lambda_.StartingPosition.TRIM_HORIZON
    assert IngestReading.of(own_stream=True).starting_position == lambda_.StartingPosition.LATEST
    # AND TRIM_HORIZON may be asked for explicitly
    assert IngestReading.of(own_stream=True, starting_position=lambda_.StartingPosition.TRIM_HORIZON
                            ).starting_position == lambda_.StartingPosition.TRIM_HORIZON
    # AND AT_TIMESTAMP needs an aware timestamp, a timestamp needs AT_TIMESTAMP, retention is Kinesis's 24 h - 365 d
    with pytest.raises(ConfigError, match="starting_timestamp is needed"):
        IngestReading.of(own_stream=True, starting_position=lambda_.StartingPosition.AT_TIMESTAMP)
    with pytest.raises(ConfigError, match="starting_timestamp is needed"):
        IngestReading.of(own_stream=True, starting_timestamp=datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(ConfigError, match="timezone-aware"):
        IngestReading.of(own_stream=True, starting_position=lambda_.StartingPosition.AT_TIMESTAMP,
                         starting_timestamp=datetime(2026, 1, 1))
    for bad, message in ((cdk.Duration.hours(12), "24 to 8760 hours"), (cdk.Duration.minutes(90), "whole number")):
        with pytest.raises(ConfigError, match=message):
            IngestReading.of(own_stream=False, retention=bad)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: WorkerTransform.from_package("--index-url=https://evil.example/simple my-pkg", "m:C"), "one pip requirement"),
    (lambda: WorkerTransform.from_package("my-pkg\nother-pkg", "m:C"), "one pip requirement"),
    (lambda: WorkerTransform.from_package("my pkg ==", "m:C"), "not a pip requirement"),
    (lambda: WorkerTransform(package="my-pkg"), "needs the transform it provides"),
    (lambda: WorkerTransform.from_package("my-pkg", "not a class"), "'module:Class'"),
    (lambda: WorkerTransform(package="my-pkg", transform="m:C", image=ecs.ContainerImage.from_registry("x")), "not both"),
])
def test_a_worker_transform_refuses_what_the_image_cannot_build(make: Callable[[], WorkerTransform], message: str) -> None:
    # GIVEN a bad package, transform or combination WHEN built THEN a ConfigError says what is wrong
    with pytest.raises(ConfigError, match=message):
        make()


def test_the_construct_refuses_settings_that_contradict_a_stream_or_transform_of_your_own(tmp_path: Path) -> None:
    # GIVEN a stream of your own with ingest_shards set, or a transform named in the config and differently in the
    # WorkerTransform
    app = cdk.App(context={**FEATURE_FLAGS, "aws:cdk:bundling-stacks": []}, outdir=str(tmp_path))
    stack = cdk.Stack(app, "UserStack")
    stream = kinesis.Stream.from_stream_arn(stack, "Clicks", STREAM_ARN)
    # WHEN the construct is built THEN it fails naming the setting
    with pytest.raises(ConfigError, match="ingest_shards"):
        GeoRebalancer(stack, "A", config=load_config({"ingest_shards": 4}), ingest_stream=stream)
    with pytest.raises(ConfigError, match="named twice"):
        GeoRebalancer(stack, "B", config=load_config({"geo_transform": "transforms.geofence:Geofences"}),
                      transform=WorkerTransform.from_package(PACKAGE, "my_transforms.zones:Zones"))


def test_an_install_without_the_sources_fails_in_one_line(tmp_path: Path) -> None:
    # GIVEN an infra package with nothing beside it (installed into site-packages, not from a checkout)
    # WHEN the sources are required THEN one line says which are missing and to install from a checkout
    with pytest.raises(AssetError) as failed:
        require_sources(tmp_path)
    assert "\n" not in str(failed.value) and "pip install -e <checkout>" in str(failed.value)
    assert "lambdas/__init__.py" in str(failed.value)


def test_the_construct_needs_the_apps_feature_flags(cdk_context: dict[str, Any], tmp_path: Path) -> None:
    # GIVEN the flags the construct is checked with, and the app's cdk.json
    # THEN they are the same
    assert {k: v for k, v in cdk_context.items() if k.startswith("@")} == FEATURE_FLAGS
    # AND an app that leaves one out (the S3 access-logs flag: without it the bucket does not synthesize) is told which
    app = cdk.App(context={**{k: v for k, v in FEATURE_FLAGS.items() if "serverAccessLogs" not in k},
                           "aws:cdk:bundling-stacks": []}, outdir=str(tmp_path))
    with pytest.raises(ConfigError, match=r'"@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": true.*cdk.json'):
        GeoRebalancer(cdk.Stack(app, "UserStack"), "GeoRebalancer", config=load_config({}))
