"""Geo-stream teardown: the handler of the stack's ``Custom::GeoStreamTeardown`` resource (``infra/teardown.py``).

The geo streams ``<prefix>-geo-v<version>`` are created and deleted by the deployer at run time; CloudFormation does
not own them, so ``cdk destroy`` alone would leave the live ones running, billed per shard hour. CloudFormation
deletes this resource after the deployer, the hooks, the router and the worker service (they depend on it), and on
that ``Delete`` the handler deletes every stream whose name starts with ``StreamPrefix``:

* ``ListStreams``, page by page (:meth:`lambdas.runtime.kinesis.GeoStreams.named`), then ``DeleteStream`` of each
  ACTIVE one. "If the stream is in the ACTIVE state, you can delete it"
  (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_DeleteStream.html): a stream still CREATING or
  UPDATING is waited for and deleted on a later pass; one already DELETING, or gone, is done. A second run (a
  retried delete) finds nothing left to do.
* Time is bounded by the invocation's: when :data:`RESPONSE_MARGIN_S` is all that is left, the answer is FAILED
  naming the streams left (the stack's deletion fails and can be retried), never a timeout: CloudFormation would
  wait an hour for an answer that does not come.

``Create`` and ``Update`` do nothing and keep one physical id, so an update never makes CloudFormation delete the
resource (and the live streams) as a replaced one. The answer goes to the request's pre-signed ``ResponseURL``
(https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html), whatever happened.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger

from geokernel.contracts.stream import StreamStatus
from lambdas.runtime.clients import make_clients
from lambdas.runtime.config import LambdaConfig
from lambdas.runtime.errors import AdapterError
from lambdas.runtime.kinesis import GeoStreams

logger = Logger(service="geo-stream-teardown")

RESPONSE_MARGIN_S = 30.0  # kept for the answer to CloudFormation
POLL_S = 10.0  # between two passes while a stream is still CREATING or UPDATING
MAX_REASON = 3000  # the whole answer must stay under 4,096 bytes
Send = Callable[[dict[str, Any], dict[str, Any]], None]


def delete_streams(streams: GeoStreams, prefix: str, seconds_left: Callable[[], float],
                   sleep: Callable[[float], None] = time.sleep) -> dict[str, str]:
    """Delete every stream named ``prefix``*; return the ones left (name: why) when time ran out, else ``{}``."""
    while True:
        left: dict[str, str] = {}
        for name, status in streams.named(prefix):
            if status == StreamStatus.DELETING:
                continue
            if status in (StreamStatus.CREATING, StreamStatus.UPDATING):
                left[name] = f"still {status}"
                continue
            try:
                streams.delete(name)
            except AdapterError as exc:  # e.g. it changed state since the listing: the next pass tries again
                left[name] = str(exc)
        if not left or seconds_left() < POLL_S:
            return left
        sleep(POLL_S)


def handle(event: dict[str, Any], streams: GeoStreams, seconds_left: Callable[[], float], send: Send,
           sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Do what ``event`` asks and send CloudFormation the answer (also returned)."""
    prefix = str(event.get("ResourceProperties", {}).get("StreamPrefix", ""))
    physical_id = str(event.get("PhysicalResourceId") or f"{prefix}*")
    status, reason = "SUCCESS", ""
    try:
        if event.get("RequestType") == "Delete":
            if not prefix.endswith("-geo-v"):  # never a prefix that could name streams of something else
                raise ValueError(f"StreamPrefix must end with '-geo-v', got {prefix!r}")
            left = delete_streams(streams, prefix, lambda: seconds_left() - RESPONSE_MARGIN_S, sleep)
            if left:
                status, reason = "FAILED", f"geo streams not deleted yet (retry the stack deletion): {left!r}"
    except Exception as exc:  # any failure is answered: CloudFormation would otherwise wait an hour
        status, reason = "FAILED", f"{type(exc).__name__}: {exc}"
    answer = {"Status": status, "Reason": reason[:MAX_REASON], "PhysicalResourceId": physical_id,
              "StackId": event.get("StackId"), "RequestId": event.get("RequestId"),
              "LogicalResourceId": event.get("LogicalResourceId")}
    send(event, answer)
    return answer


def send_to_cloudformation(event: dict[str, Any], answer: dict[str, Any]) -> None:
    """PUT ``answer`` to the request's pre-signed S3 URL (an empty content type, as the URL was signed with)."""
    body = json.dumps(answer).encode()
    request = urllib.request.Request(str(event["ResponseURL"]), data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    with urllib.request.urlopen(request, timeout=30) as response:  # CloudFormation's https URL
        response.read()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The custom resource's entry point (CloudFormation invokes it with the request)."""
    streams = GeoStreams(make_clients(LambdaConfig.from_env()).kinesis)
    answer = handle(event, streams, lambda: float(context.get_remaining_time_in_millis()) / 1000.0,
                    send_to_cloudformation)
    logger.info("geo stream teardown", extra={"request": event.get("RequestType"), "answer": answer})
    return answer
