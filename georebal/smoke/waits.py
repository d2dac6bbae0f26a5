"""The smoke run's bounded waits: until a spec is active (control item ``active``), and until the output bucket
holds every probe (read once per object: output objects are written once, ``geokernel/contracts/enriched.py``).
Each prints its progress at every poll and says what is missing when it gives up.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

from botocore.exceptions import ClientError

from geokernel.contracts.control import ControlKey
from geokernel.contracts.dynamo import plain_item
from geokernel.contracts.enriched import ENRICHED_PREFIX, decode_lines, parse_enriched_key
from geokernel.contracts.errors import ContractError
from geokernel.contracts.spec_pointer import ActivePointer
from georebal.smoke.checks import Verdict
from georebal.smoke.clock import Clock, took

#: Where the workers write (``enriched_key``: ``enriched/dt=<day>/hour=<HH>/v<version>-<worker>-...jsonl.gz``), every
#: hour, version and worker
OUTPUT_PREFIX = ENRICHED_PREFIX

Say = Callable[[str], None]


def control_item(dynamodb: Any, table: str, key: ControlKey) -> dict[str, Any] | None:
    """The control item ``key`` in plain values (strongly consistent read), None when absent."""
    item = dynamodb.get_item(TableName=table, Key={"pk": {"S": key.value}}, ConsistentRead=True).get("Item")
    return None if item is None else plain_item(item)


def wait_for_active(dynamodb: Any, table: str, clock: Clock, *, started: float, timeout_s: float, poll_s: float,
                    on_poll: Callable[[int], None], say: Say) -> Verdict:
    """Poll control item ``active`` until it names a version (passes) or ``timeout_s`` after ``started`` (the first
    event) went by (fails, naming what is missing). ``on_poll(n)`` runs before the ``n``-th sleep (the ticks)."""
    polls, error = 0, ""
    while True:
        try:
            active = control_item(dynamodb, table, ControlKey.ACTIVE)
            version = None if active is None else ActivePointer.version_of(active)
        except ClientError as exc:
            active, version, error = None, None, f" (last read failed: {exc})"
        elapsed = clock.now() - started
        if active is not None and version is not None:
            return Verdict("spec active", True, f"v{version} active {took(elapsed)} after the first event "
                                                f"(geo stream {active.get('stream_name')})")
        if elapsed >= timeout_s:
            return Verdict("spec active", False, no_active(dynamodb, table, timeout_s) + error)
        on_poll(polls)
        polls += 1
        say(f"wait for v1: {took(elapsed)} of at most {took(timeout_s)}; control item 'active' not in {table} yet")
        clock.sleep(poll_s)


def no_active(dynamodb: Any, table: str, timeout_s: float) -> str:
    """What is missing when no spec went live: a published spec (``desired``), or its deployment."""
    try:
        desired = control_item(dynamodb, table, ControlKey.DESIRED)
    except ClientError:
        desired = None
    head = f"no spec active {took(timeout_s)} after the first event: control item 'active' is missing in {table}"
    if desired is not None:
        return (f"{head}; v{desired.get('version')} was published (control item 'desired') but did not go live: "
                f"look at the deployer's and the workers' logs (LogGroupDeployer, LogGroupWorkers) and control item "
                f"'deploy'")
    return (f"{head}, and so is 'desired': no spec was published, no snapshot reached the partitioner: look at the "
            f"Spark job (LogGroupAggregation, EmrJobRunId or GlueJobName), the snapshots bucket, the partitioner's log")


class OutputScanner:
    """The event ids of the enriched records in ``bucket`` under :data:`OUTPUT_PREFIX`: ``counts`` (records per
    event id; delivery is at-least-once), each object read once; ``bad_lines``: lines that are no record (a body
    that is not gzip'd JSON lines counts as one)."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self.s3, self.bucket = s3, bucket
        self.counts: Counter[str] = Counter()
        self.read: set[str] = set()
        self.bad_lines = 0

    @property
    def where(self) -> str:
        return f"s3://{self.bucket}/{OUTPUT_PREFIX}"

    def scan(self) -> None:
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=OUTPUT_PREFIX):
            for obj in page.get("Contents", []):
                key = obj["Key"]
                if key not in self.read:
                    self._read(key)
                    self.read.add(key)

    def _read(self, key: str) -> None:
        try:
            parse_enriched_key(key)
        except ContractError:
            return
        try:
            lines = decode_lines(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read(), key)
        except ContractError:
            self.bad_lines += 1
            return
        for line in lines:
            try:
                self.counts[str(json.loads(line)["event_id"])] += 1
            except (ValueError, TypeError, KeyError):
                self.bad_lines += 1

    def holding(self, ids: Collection[str]) -> int:
        return sum(1 for i in ids if i in self.counts)


def wait_for_output(scanner: OutputScanner, ids: Collection[str], clock: Clock, *, timeout_s: float, poll_s: float,
                    say: Say) -> float:
    """Scan until the output holds every one of ``ids`` or ``timeout_s`` went by; returns the seconds waited."""
    started = clock.now()
    while True:
        try:
            scanner.scan()
        except ClientError as exc:  # a read that failed is asked again at the next poll
            say(f"wait for the output: {scanner.where} could not be read ({exc})")
        have, elapsed = scanner.holding(ids), clock.now() - started
        if have == len(ids) or elapsed >= timeout_s:
            return elapsed
        say(f"wait for the output: {have:,}/{len(ids):,} events in {scanner.where} ({len(scanner.read)} objects), "
            f"{took(elapsed)} of at most {took(timeout_s)}")
        clock.sleep(poll_s)
