"""Fixtures for the worker tests: a moto server on 127.0.0.1 and per-test AWS resources.

The server is the local loop's :class:`local.aws.SerialMotoServer`: it runs **one request at
a time**, which gives moto the per-item atomicity of real DynamoDB that the lease protocol
relies on; the clients are still real concurrent threads and processes talking HTTP.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from geo_service.adapters.aws import Clients, make_clients
from local.aws import SerialMotoServer

# The test modules import their helpers as ``geo_testkit`` whatever pytest's import mode.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from geo_testkit import Resources

REGION = "us-east-1"
logging.getLogger("werkzeug").setLevel(logging.WARNING)
for _k, _v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
               "AWS_DEFAULT_REGION": REGION}.items():
    os.environ.setdefault(_k, _v)


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """A moto server on a free local port that runs one request at a time; yields its URL."""
    server = SerialMotoServer().start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture()
def clients(moto_endpoint: str) -> Clients:
    return make_clients(moto_endpoint, REGION)


@pytest.fixture()
def resources(clients: Clients) -> Resources:
    """Create the control and leases tables and the buckets under a fresh prefix."""
    prefix = f"t{uuid.uuid4().hex[:10]}"
    res = Resources(prefix=prefix, control_table=f"{prefix}-control", leases_table=f"{prefix}-leases",
                    specs_bucket=f"{prefix}-specs", costs_bucket=f"{prefix}-costs", output_bucket=f"{prefix}-output")
    for table, key in ((res.control_table, "pk"), (res.leases_table, "lease_key")):
        clients.dynamodb.create_table(TableName=table, KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                                      AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                                      BillingMode="PAY_PER_REQUEST")
    for bucket in (res.specs_bucket, res.costs_bucket, res.output_bucket):
        clients.s3.create_bucket(Bucket=bucket)
    return res
