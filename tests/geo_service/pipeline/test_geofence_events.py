"""Geofence transitions as EventBridge events (geo_service.pipeline.geofence_events) and the PutEvents adapter
(geo_service.adapters.eventbridge): the shape, the idempotency key, batching within the limits, retries."""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws

from geo_service.adapters.eventbridge import (
    MAX_BYTES,
    MAX_ENTRIES,
    EventSinkError,
    batches,
    entry_size,
    put_events,
)
from geo_service.pipeline.geofence_events import (
    DETAIL_TYPE,
    SOURCE,
    GeofenceSink,
    details_of,
    idempotency_key,
)

RECORD = {"event_id": "e1", "entity_id": "car-7", "ts": 1_767_225_601_234, "lat": 35.6895, "lon": 139.6917,
          "transitions": [{"zone": "TOKYO-CORE", "kind": "ENTER"}, {"zone": "JP", "kind": "DWELL"}]}


def test_a_transition_is_shaped_like_an_amazon_location_geofence_event() -> None:
    # GIVEN an enriched record with two transitions
    # WHEN its details are made
    details = details_of(RECORD)
    # THEN each has Amazon Location's fields (Position is [lon, lat], SampleTime ISO 8601 in UTC with milliseconds)
    # and ours (DWELL, the source event's id, the idempotency key)
    assert details[0] == {"EventType": "ENTER", "GeofenceId": "TOKYO-CORE", "DeviceId": "car-7",
                          "SampleTime": "2026-01-01T00:00:01.234Z", "Position": [139.6917, 35.6895],
                          "EventId": "e1", "IdempotencyKey": idempotency_key("e1", "TOKYO-CORE", "ENTER")}
    assert details[1]["EventType"] == "DWELL" and details[1]["GeofenceId"] == "JP"
    # AND an ISO ts gives the same SampleTime; a record without transitions, or with none, gives no event
    assert details_of({**RECORD, "ts": "2026-01-01T09:00:01.234+09:00"})[0]["SampleTime"] == "2026-01-01T00:00:01.234Z"
    assert details_of({**RECORD, "transitions": []}) == [] and details_of({"event_id": "x"}) == []


def test_the_entries_name_the_bus_our_source_and_the_detail_type() -> None:
    # GIVEN a sink on a bus
    sink = GeofenceSink(client=None, bus="fences")
    # WHEN a record's entries are made
    entries = sink.entries(RECORD)
    # THEN each is one PutEvents entry of our source (aws. is reserved) and Amazon Location's detail-type
    assert [(e["Source"], e["DetailType"], e["EventBusName"]) for e in entries] == [(SOURCE, DETAIL_TYPE, "fences")] * 2
    assert not SOURCE.startswith("aws.")
    assert [json.loads(e["Detail"]) for e in entries] == details_of(RECORD)


@pytest.mark.parametrize("bad", [{"zone": "A", "kind": "INSIDE"}, {"zone": 3, "kind": "ENTER"}, "ENTER"])
def test_a_malformed_transition_is_named(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"event 'e1': a transition must be .*, got " + re.escape(repr(bad))):
        details_of({**RECORD, "transitions": [bad]})


def test_the_idempotency_key_is_the_same_for_every_copy_and_unambiguous() -> None:
    # GIVEN the same transition twice, and ids that a plain "event:zone:kind" join would confuse
    # THEN copies share the key; any field that differs gives another
    assert idempotency_key("e1", "A", "ENTER") == idempotency_key("e1", "A", "ENTER")
    keys = {idempotency_key(*t) for t in [("e1", "A", "ENTER"), ("e1", "A", "EXIT"), ("e1", "B", "ENTER"),
                                          ("e2", "A", "ENTER"), ("a:b", "c", "ENTER"), ("a", "b:c", "ENTER")]}
    assert len(keys) == 6 and all(len(k) == 64 for k in keys)


def _entry(detail_bytes: int) -> dict[str, Any]:
    return {"Source": SOURCE, "DetailType": DETAIL_TYPE, "Detail": "x" * detail_bytes, "EventBusName": "b"}


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 120_000), max_size=40))
def test_batches_keep_the_order_within_ten_entries_and_256_kb(sizes: list[int]) -> None:
    # GIVEN entries of any size up to 120 KB of detail
    entries = [_entry(n) for n in sizes]
    # WHEN they are cut into calls
    calls = batches(entries)
    # THEN the calls hold every entry once in order, each call at most 10 entries totalling under 256 KB
    assert [e for c in calls for e in c] == entries
    assert all(0 < len(c) <= MAX_ENTRIES and sum(entry_size(e) for e in c) < MAX_BYTES for c in calls)
    # AND a call is cut only when the next entry would not fit
    for a, b in itertools.pairwise(calls):
        assert len(a) == MAX_ENTRIES or sum(entry_size(e) for e in a) + entry_size(b[0]) >= MAX_BYTES


def test_an_entry_is_sized_as_eventbridge_counts_it_and_one_too_big_alone_is_named() -> None:
    # GIVEN an entry with a time, a 2-byte UTF-8 character and a resource
    entry = {"Source": "s", "DetailType": "dt", "Detail": "é", "Time": 0, "Resources": ["arn:r"]}
    # THEN its size is 14 (Time) + 1 + 2 + 2 + 5
    assert entry_size(entry) == 24
    with pytest.raises(EventSinkError, match=r"entry #1 is \d+ bytes: an entry must be under 262144"):
        batches([_entry(1), _entry(MAX_BYTES)])


class FakeEvents:
    """An EventBridge client whose answers are scripted: per call, the error code of each entry (None: put)."""

    def __init__(self, codes: list[list[str | None]]) -> None:
        self.codes = codes
        self.calls: list[list[Mapping[str, Any]]] = []

    def put_events(self, Entries: list[Mapping[str, Any]]) -> dict[str, Any]:
        self.calls.append(list(Entries))
        codes = self.codes.pop(0) if self.codes else [None] * len(Entries)
        out = [{"ErrorCode": c, "ErrorMessage": f"{c} happened"} if c else {"EventId": "id"} for c in codes]
        return {"FailedEntryCount": sum(1 for c in codes if c), "Entries": out}


def test_throttled_entries_alone_are_put_again_and_counted() -> None:
    # GIVEN 12 entries (two calls) whose first call has two throttled entries
    client = FakeEvents([[None, "ThrottlingException", None, None, None, None, None, None, "InternalFailure", None]])
    entries = [_entry(i) for i in range(12)]
    pauses: list[float] = []
    # WHEN they are put
    got = put_events(client, entries, sleep=pauses.append, concurrency=1)
    # THEN the two failed entries are put again alone, after a pause; 3 calls in all
    assert [len(c) for c in client.calls] == [10, 2, 2] and client.calls[1] == [entries[1], entries[8]]
    assert (got.calls, got.entries, got.retried) == (3, 12, 2) and pauses == [0.1]


def test_a_code_no_retry_fixes_raises_at_once_and_retries_used_up_raise_naming_the_code() -> None:
    # GIVEN an entry refused for its source, and one throttled on every call
    refused = FakeEvents([["NotAuthorizedForSourceException"]])
    with pytest.raises(EventSinkError, match=re.escape("bus 'b': 1 entries failed (cannot be retried), e.g. "
                                                       "'NotAuthorizedForSourceException'")):
        put_events(refused, [_entry(1)], sleep=lambda _s: None, concurrency=1)
    assert len(refused.calls) == 1
    throttled = FakeEvents([["ThrottlingException"]] * 5)
    with pytest.raises(EventSinkError, match="still failing after 3 calls"):
        put_events(throttled, [_entry(1)], attempts=3, sleep=lambda _s: None, concurrency=1)
    assert len(throttled.calls) == 3


class SlowEvents:
    """An EventBridge client taking 20 ms a call, counting the calls in flight at once (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = self.most = 0
        self.put: list[Mapping[str, Any]] = []

    def put_events(self, Entries: list[Mapping[str, Any]]) -> dict[str, Any]:
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        time.sleep(0.02)
        with self.lock:
            self.in_flight -= 1
            self.put += Entries
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "id"} for _ in Entries]}


def test_a_flushs_calls_run_eight_at_once_and_put_every_entry_once() -> None:
    # GIVEN 250 entries (25 calls) and a client taking 20 ms a call
    client, entries = SlowEvents(), [_entry(i) for i in range(250)]
    # WHEN they are put
    started = time.perf_counter()
    got = put_events(client, entries)
    # THEN at most 8 calls were in flight at once (more than one), every entry was put once, in a fraction of the
    # half second the calls take one after another
    assert 1 < client.most <= 8 and got.calls == 25
    assert sorted(e["Detail"] for e in client.put) == sorted(e["Detail"] for e in entries)
    assert time.perf_counter() - started < 0.4


@pytest.fixture()
def bus_to_queue() -> Iterator[tuple[Any, Any, str]]:
    """An in-memory AWS with a bus whose rule sends our geofence events to an SQS queue."""
    with mock_aws():
        events, sqs = boto3.client("events", region_name="us-east-1"), boto3.client("sqs", region_name="us-east-1")
        events.create_event_bus(Name="fences")
        url = sqs.create_queue(QueueName="fences")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        events.put_rule(Name="all", EventBusName="fences",
                        EventPattern=json.dumps({"source": [SOURCE], "detail-type": [DETAIL_TYPE]}))
        events.put_targets(Rule="all", EventBusName="fences", Targets=[{"Id": "q", "Arn": arn}])
        yield events, sqs, url


def test_a_rule_on_the_bus_receives_each_transition_once_in_ten_entry_calls(bus_to_queue: tuple[Any, Any, str]
                                                                            ) -> None:
    # GIVEN 13 records with two transitions each
    events, sqs, url = bus_to_queue
    sink = GeofenceSink(events, "fences")
    records = [{**RECORD, "event_id": f"e{i}"} for i in range(13)]
    entries = [e for r in records for e in sink.entries(r)]
    # WHEN the sink puts them
    got = sink.put(entries)
    # THEN 26 events went out in 3 calls, and the queue received each one with its detail
    assert (got.calls, got.entries) == (3, 26)
    received = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600).get("Messages"):
        received += [json.loads(m["Body"]) for m in batch]
    assert sorted(e["detail"]["IdempotencyKey"] for e in received) == sorted(
        d["IdempotencyKey"] for r in records for d in details_of(r))
    assert {(e["source"], e["detail-type"], e["time"]) for e in received} == {
        (SOURCE, DETAIL_TYPE, "2026-01-01T00:00:01Z")}
