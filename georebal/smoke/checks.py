"""The smoke run's checks, each a function of boto3-style clients and the deployment's names, returning a
:class:`Verdict` (tested against moto: tests/georebal/test_smoke.py).

==========================  ===================================================================================
check                       how
==========================  ===================================================================================
events in vs out            the probe ids the output bucket holds (:class:`georebal.smoke.waits.OutputScanner`)
router failure queue empty  SQS ``GetQueueAttributes``: visible, in-flight and delayed messages all 0
no AccessDenied in logs     CloudWatch Logs ``FilterLogEvents`` over each judged log group since the run began
geo streams gone            Kinesis ``ListStreams``: no ``<prefix>-geo-v<n>`` left (deleted first: the deployer
                            creates them at run time, they are no CloudFormation resources)
==========================  ===================================================================================
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from geokernel.contracts.stream import geo_stream_prefix
from georebal.smoke.clock import Clock, took

#: A regex filter pattern (``%...%``) matches inside a word, so ``AccessDeniedException`` too: a plain term matches
#: whole words only (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/FilterAndPatternSyntax.html). Each
#: message returned is checked for :data:`ACCESS_DENIED` again (an emulator may ignore a pattern it does not know).
ACCESS_DENIED = "AccessDenied"
ACCESS_DENIED_PATTERN = f"%{ACCESS_DENIED}%"
SAMPLES = 3
QUEUE_COUNTS = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed")


@dataclass(frozen=True)
class Verdict:
    """One check: its ``name``, whether it passed, one line of ``detail`` and further lines (``more``)."""

    name: str
    ok: bool
    detail: str
    more: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        return [f"{'ok  ' if self.ok else 'FAIL'}  {self.name}: {self.detail}", *(f"        {m}" for m in self.more)]


def _error(exc: ClientError) -> str:
    error = exc.response.get("Error", {})
    return f"{error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")


def check_delivery(expected: Collection[str], counts: Counter[str], where: str, *, waited_s: float) -> Verdict:
    """Every ``expected`` event id among the output's ``counts`` (records per event id), deduplicated."""
    lost = sorted(set(expected) - set(counts))
    n, out = len(expected), len(expected) - len(lost)
    twice = sum(counts[e] - 1 for e in expected if counts[e] > 1)
    again = f"; {twice:,} delivered more than once (at-least-once)" if twice else ""
    if not lost:
        return Verdict("events in vs out", True, f"{n:,} in, {out:,} out, 0 lost{again} ({where})")
    shown = ", ".join(lost[:5]) + (", ..." if len(lost) > 5 else "")
    return Verdict("events in vs out", False,
                   f"{n:,} in, {out:,} out, {len(lost):,} lost: not in {where} after {took(waited_s)} ({shown})",
                   ("look at: the router failure queue, the quarantine bucket (quarantine/router/, quarantine/geo/), "
                    "the router's and the workers' logs",))


def check_failure_queue(sqs: Any, queue_url: str) -> Verdict:
    """The router's failure queue holds no message (visible, in flight or delayed)."""
    try:
        attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=list(QUEUE_COUNTS))["Attributes"]
    except ClientError as exc:
        return Verdict("router failure queue empty", False, f"{queue_url} could not be read ({_error(exc)})")
    held = sum(int(attrs.get(name, 0)) for name in QUEUE_COUNTS)
    if not held:
        return Verdict("router failure queue empty", True, f"0 messages in {queue_url}")
    return Verdict("router failure queue empty", False,
                   f"{held} message(s) in {queue_url}: a router batch failed after its retries",
                   ("each names a shard and a sequence range of the ingest stream (docs/DEPLOY.md, RouterFailures)",))


def count_access_denied(logs: Any, groups: Mapping[str, str], since_ms: int, until_ms: int | None = None) -> Verdict:
    """Log events containing ``AccessDenied`` in each of ``groups`` (label -> log group name) since ``since_ms``."""
    found: list[str] = []
    unread: list[str] = []
    for label, group in groups.items():
        try:
            found += [f"{label}: {m}" for m in _denied(logs, group, since_ms, until_ms)]
        except ClientError as exc:
            unread.append(f"{label} ({group}): {_error(exc)}")
    since = datetime.fromtimestamp(since_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    where = f"{len(groups)} log groups ({', '.join(groups)}) since {since}"
    samples = tuple(f[:300] for f in found[:SAMPLES])
    if unread:
        return Verdict("no AccessDenied in logs", False, f"{len(found)} in {where}; not read: {'; '.join(unread)}",
                       samples)
    return Verdict("no AccessDenied in logs", not found, f"{len(found)} in {where}", samples)


def _denied(logs: Any, group: str, since_ms: int, until_ms: int | None) -> list[str]:
    ask: dict[str, Any] = {"logGroupName": group, "startTime": since_ms, "filterPattern": ACCESS_DENIED_PATTERN}
    if until_ms is not None:
        ask["endTime"] = until_ms
    out: list[str] = []
    for page in logs.get_paginator("filter_log_events").paginate(**ask):
        out += [str(e.get("message", "")).strip() for e in page.get("events", [])
                if ACCESS_DENIED in str(e.get("message", ""))]
    return out


def geo_streams(kinesis: Any, prefix: str) -> list[str]:
    """The deployment's geo streams ``<prefix>-geo-v<n>`` that Kinesis lists (any status, DELETING included)."""
    name = re.compile(rf"^{re.escape(geo_stream_prefix(prefix))}\d+$")
    names: list[str] = []
    for page in kinesis.get_paginator("list_streams").paginate():
        names += [s for s in page.get("StreamNames", []) if name.match(s)]
    return sorted(set(names))


def remove_geo_streams(kinesis: Any, prefix: str, clock: Clock, *, timeout_s: float, poll_s: float) -> Verdict:
    """Delete the geo streams the deployer left (they are no CloudFormation resources), then wait until Kinesis no
    longer lists any: passes when none is left within ``timeout_s``."""
    pattern = f"{geo_stream_prefix(prefix)}*"
    left = geo_streams(kinesis, prefix)
    for stream in left:
        try:
            kinesis.delete_stream(StreamName=stream, EnforceConsumerDeletion=True)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("ResourceNotFoundException", "ResourceInUseException"):
                return Verdict("geo streams gone", False, f"{stream} could not be deleted ({_error(exc)})")
    deleted = f" (deleted {', '.join(left)}: the deployer creates them at run time)" if left else ""
    started = clock.now()
    while True:
        still = geo_streams(kinesis, prefix)
        if not still:
            return Verdict("geo streams gone", True, f"Kinesis lists no {pattern}{deleted}")
        if clock.now() - started >= timeout_s:
            return Verdict("geo streams gone", False,
                           f"{', '.join(still)} still listed {took(timeout_s)} after the delete{deleted}",
                           (f"delete by hand: aws kinesis delete-stream --stream-name {still[0]}",))
        clock.sleep(poll_s)
