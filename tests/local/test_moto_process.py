"""local.moto_process: the loop's local AWS in a process of its own, and the throttle reached over HTTP."""

from __future__ import annotations

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from local.aws import REGION
from local.moto_process import MotoProcess


def test_the_local_aws_serves_from_its_own_process_and_the_throttle_is_reached_over_http() -> None:
    # GIVEN the loop's local AWS started in a child process, with a geo stream
    server = MotoProcess()
    try:
        kinesis = boto3.client("kinesis", endpoint_url=server.url, region_name=REGION, aws_access_key_id="testing",
                               aws_secret_access_key="testing",
                               config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))
        kinesis.create_stream(StreamName="t-geo-v1", ShardCount=1)
        kinesis.create_stream(StreamName="t-ingest", ShardCount=1)
        assert server.throttle.refused == 0 and server.throttle.first_refused_at is None
        # WHEN the stream-throttle fault turns the throttle on for every call on the geo streams
        server.throttle.start("t-geo", 1.0, 60.0)
        # THEN a put to a geo stream is refused as Kinesis refuses it, one to another stream passes,
        # and the parent reads the child's counters
        with pytest.raises(ClientError) as err:
            kinesis.put_records(StreamName="t-geo-v1", Records=[{"Data": b"{}", "PartitionKey": "a"}])
        assert err.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
        kinesis.put_records(StreamName="t-ingest", Records=[{"Data": b"{}", "PartitionKey": "a"}])
        assert server.throttle.refused == 1 and server.throttle.first_refused_at is not None
        assert server.throttle.until > server.throttle.first_refused_at
    finally:
        server.stop()
    # AND stopping it ends the child process
    assert server.returncode == 0
