"""local.iam: each part signs as its own role, the gate holds its calls against its statements, moto authenticates.

A moto server with the gate in front, two parts (a router allowed to put to the geo streams and use their key, a
deployer allowed nothing on Kinesis), a harness user, and moto's access control on. These run in the test process,
so the fixture turns moto's access control off and resets its backends afterwards.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import boto3
import pytest
from botocore.exceptions import ClientError

from local.aws import REGION, EmbeddedAws, Names, SerialMotoServer, wait_stream_active
from local.iam.gate import IamGate
from local.iam.principals import Principals, acting_as, create_principals, enforce, sign_as_acting_part
from local.wiring.stack_wiring import Component, RolePolicy

GEO_KEY = "arn:aws:kms:us-east-1:123456789012:key/GeoStreamsKey"


@dataclass(frozen=True)
class Twin:
    aws: EmbeddedAws
    principals: Principals
    gate: IamGate
    stream: str


def _moto_api(url: str, path: str, body: bytes) -> None:
    req = urllib.request.Request(url + path, data=body, method="POST", headers={"Content-Type": "text/plain"})
    urllib.request.urlopen(req, timeout=10).read()


@pytest.fixture()
def twin() -> Iterator[Twin]:
    server = SerialMotoServer().start()
    names = Names(f"georebal-iam-{uuid.uuid4().hex[:8]}")
    aws = EmbeddedAws(endpoint_url=server.url, names=names, server=server)
    stream = names.geo_stream(1)
    kinesis = aws.client("kinesis")
    kinesis.create_stream(StreamName=stream, ShardCount=1)
    wait_stream_active(kinesis, stream)
    pattern = f"arn:aws:kinesis:{REGION}:123456789012:stream/{names.prefix}-geo-v*"
    roles = {
        Component.ROUTER: RolePolicy(Component.ROUTER, "RouterRole", (
            {"Effect": "Allow", "Action": ["kinesis:PutRecord", "kinesis:PutRecords"], "Resource": pattern},
            {"Effect": "Allow", "Action": "kms:GenerateDataKey", "Resource": GEO_KEY})),
        Component.DEPLOYER: RolePolicy(Component.DEPLOYER, "DeployerRole", (
            {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::nothing/*"},)),
    }
    principals = create_principals(aws.client("iam"), aws.client("sts"), roles)
    gate = IamGate(principals, roles, {pattern: GEO_KEY}, REGION)
    server.gate = gate
    enforce(server.url)
    try:
        yield Twin(aws, principals, gate, stream)
    finally:
        _moto_api(server.url, "/moto-api/reset-auth", b"inf")  # this process's moto: access control off again
        _moto_api(server.url, "/moto-api/reset", b"")
        server.stop()
        boto3.DEFAULT_SESSION = None


def _client(twin: Twin, component: Component, secret: str | None = None) -> object:
    p = twin.principals.of(component)
    return boto3.session.Session(aws_access_key_id=p.access_key, aws_secret_access_key=secret or p.secret_key,
                                 aws_session_token=p.token, region_name=REGION).client(
        "kinesis", endpoint_url=twin.aws.endpoint_url)


def test_a_part_may_do_what_its_role_allows_and_is_refused_the_rest_by_name(twin: Twin) -> None:
    # GIVEN the router's keys WHEN it puts to a geo stream THEN the put passes (the key's implied permission too)
    router = _client(twin, Component.ROUTER)
    router.put_record(StreamName=twin.stream, Data=b"{}", PartitionKey="e")  # type: ignore[attr-defined]
    # WHEN it asks for the account's shard quota (an account-level action its role does not hold)
    with pytest.raises(ClientError) as refused:
        router.describe_limits()  # type: ignore[attr-defined]
    # THEN AWS's AccessDenied answer names the action and the resource, and the gate recorded who it was
    err = refused.value.response["Error"]
    assert err["Code"] == "AccessDeniedException" and "kinesis:DescribeLimits on resource: *" in err["Message"]
    assert [(d.part, d.principal, d.action, d.resource, d.by) for d in twin.gate.denials] == [
        ("router", "RouterRole", "kinesis:DescribeLimits", "*", "twin")]
    assert twin.gate.checked["router"] == 3  # the put, its implied kms:GenerateDataKey, the refused call


def test_an_encrypted_target_needs_the_keys_permission_too(twin: Twin) -> None:
    # GIVEN the deployer, allowed nothing on Kinesis or its key WHEN it puts to the encrypted geo stream
    with pytest.raises(ClientError):
        _client(twin, Component.DEPLOYER).put_record(StreamName=twin.stream, Data=b"{}",  # type: ignore[attr-defined]
                                                     PartitionKey="e")
    # THEN it is refused on the put itself (checked before the implied key permission)
    assert twin.gate.denials[-1].action == "kinesis:PutRecord"


def test_in_process_parts_sign_as_the_acting_part_and_anything_else_is_refused(twin: Twin) -> None:
    # GIVEN boto3's default session signing as the acting part
    sign_as_acting_part(twin.principals)
    client = boto3.client("kinesis", endpoint_url=twin.aws.endpoint_url, region_name=REGION)
    # WHEN the same client puts as the router, then outside any part
    with acting_as(Component.ROUTER):
        client.put_record(StreamName=twin.stream, Data=b"{}", PartitionKey="e")
    with pytest.raises(ClientError):
        client.put_record(StreamName=twin.stream, Data=b"{}", PartitionKey="e")
    # THEN the first passed as the router and the second was refused as signed by no part
    assert twin.gate.checked["router"] == 2
    assert "signed by no part" in twin.gate.denials[-1].reason


def test_moto_authenticates_the_signature_and_the_gate_records_its_refusal(twin: Twin) -> None:
    # GIVEN the router's access key with a wrong secret WHEN it calls
    with pytest.raises(ClientError) as refused:
        _client(twin, Component.ROUTER, secret="wrong").put_record(  # type: ignore[attr-defined]
            StreamName=twin.stream, Data=b"{}", PartitionKey="e")
    # THEN moto refused the signature, and the gate recorded moto's refusal against the router
    assert "Signature" in json.dumps(refused.value.response["Error"])
    assert twin.gate.denials[-1].by == "moto" and twin.gate.denials[-1].part == "router"


def test_a_put_the_twin_splits_is_signed_again_and_passes_moto(twin: Twin) -> None:
    # GIVEN the put-partial fault on the geo streams (the twin drops records from each put before moto sees it)
    twin.aws.server.throttle.start(twin.stream.rsplit("v", 1)[0], 0.5, 60.0, seed=1, partial=True)
    try:
        # WHEN the router puts 20 records
        resp = _client(twin, Component.ROUTER).put_records(  # type: ignore[attr-defined]
            StreamName=twin.stream, Records=[{"Data": b"{}", "PartitionKey": f"e{i}"} for i in range(20)])
    finally:
        twin.aws.server.throttle.until = 0.0
    # THEN some records failed as Kinesis fails them, the rest were written, and nobody refused the request: the
    # shortened request was signed again as the router (moto checks the signature over the body)
    assert 0 < resp["FailedRecordCount"] < 20
    assert twin.gate.denials == []
