"""The report's EVENTBRIDGE section (local.report.eventbridge): the geofence events received on the loop's bus against
the output's transitions, deduplicated by IdempotencyKey; the loop's bus, rule and log group in the embedded AWS."""

from __future__ import annotations

import io
import json
import logging
import uuid
from pathlib import Path
from typing import Any

from geo_service.adapters.logs import configure, get_logger, log
from geo_service.pipeline.geofence_events import DETAIL_TYPE, SOURCE, GeofenceSink, details_of
from geokernel.contracts.enriched import EnrichedRecord
from local.aws import EmbeddedAws, Names, SerialMotoServer
from local.report.eventbridge import GeofenceLog, Puts, compare, read_received, worker_puts


def _record(event_id: str, transitions: list[dict[str, str]], **fields: Any) -> EnrichedRecord:
    base = {"event_id": event_id, "entity_id": "car-1", "ts": 1_767_225_601_000 + int(event_id[1:]), "lat": 35.7,
            "lon": 139.7, "transitions": transitions, **fields}
    return EnrichedRecord(event_id=event_id, spec_version=1, partition_id="p0001", worker_id="w0001", stray=False,
                          owner="h:1:a", processed_at=1, fields=base)


def _received(record: EnrichedRecord) -> list[dict[str, Any]]:
    """The events a rule's target gets for a record's transitions."""
    return [{"source": SOURCE, "detail-type": DETAIL_TYPE, "detail": d}
            for d in details_of({**record.fields, "event_id": record.event_id})]


ENTER = {"zone": "TOKYO-JP-CORE", "kind": "ENTER"}
EXIT = {"zone": "TOKYO-JP-CORE", "kind": "EXIT"}


def test_what_arrived_equals_the_output_after_dedupe_by_idempotency_key() -> None:
    # GIVEN three records (one written twice after a takeover, one without transitions) and their events received,
    # the takeover's transition twice
    a, b, quiet = _record("e1", [ENTER]), _record("e2", [EXIT, {"zone": "JP-CORES", "kind": "DWELL"}]), _record("e3", [])
    received = _received(a) + _received(b) + _received(a)
    # WHEN compared
    got = compare([a, b, a, quiet], received, Puts(4, 2, 0))
    # THEN 3 transitions each side, none missing or extra; the copy is counted apart
    assert got.ok and (got.received, got.deliveries, got.in_output, got.missing, got.extra) == (3, 4, 3, 0, 0)
    assert got.line() == "EVENTBRIDGE: 3 transitions received, 3 in the output, 0 missing, 0 extra"
    assert "1 copies of a transition put again" in "\n".join(got.section())


def test_a_lost_an_unexpected_and_a_changed_event_each_fail_it() -> None:
    # GIVEN the output's two transitions, of which one never arrived, one arrived with another position, and an
    # event the output does not have
    a, b = _record("e1", [ENTER]), _record("e2", [EXIT])
    changed = _received(b)[0]
    changed["detail"] = {**changed["detail"], "Position": [0.0, 0.0]}
    stranger = _received(_record("e9", [ENTER]))
    # WHEN compared
    got = compare([a, b], [changed, *stranger])
    # THEN one missing, one extra, one differing, each shown
    assert not got.ok and (got.missing, got.extra, got.differing) == (1, 1, 1)
    assert [e.split(":")[0] for e in got.examples] == ["missing", "extra", "differing"]


def _worker_lines(*lines: tuple[str, dict[str, int]]) -> str:
    """Log lines as a worker writes them (geo_service.adapters.logs: the Powertools schema, the event as message)."""
    logger = get_logger()
    before = (list(logger.handlers), logger.level, logger.propagate)
    buf = io.StringIO()
    configure(buf)
    try:
        for event, fields in lines:
            log(logger, logging.INFO, event, **fields)
    finally:
        logger.handlers[:] = before[0]
        logger.setLevel(before[1])
        logger.propagate = before[2]
    return buf.getvalue()


def test_the_workers_put_lines_are_summed(tmp_path: Path) -> None:
    # GIVEN two workers' logs with put lines among others (and a line cut short by a kill)
    (tmp_path / "worker-1.log").write_text(_worker_lines(
        ("geofence_events_put", {"events": 12, "calls": 2, "retried": 1}), ("state_handoff", {"handed": 3}))
        + '{"level":"INFO","message":"geofence_events_put","ev')
    (tmp_path / "worker-2.log").write_text(_worker_lines(("geofence_events_put", {"events": 3, "calls": 1,
                                                                                  "retried": 0})))
    # THEN the sums are what they put
    assert worker_puts(sorted(tmp_path.glob("worker-*.log"))) == Puts(15, 3, 1)


def test_the_loops_bus_sends_each_geofence_event_to_its_log_group_and_the_report_reads_them_all() -> None:
    # GIVEN the embedded AWS with the loop's geofence bus, rule and log group
    server = SerialMotoServer().start()
    aws = EmbeddedAws(endpoint_url=server.url, names=Names(f"georebal-eb-{uuid.uuid4().hex[:8]}"), server=server)
    try:
        group = aws.create_geofence_bus()
        # WHEN a sink puts the transitions of 12 records (24 events) on the bus, and something else is put there too
        sink = GeofenceSink(aws.client("events"), aws.names.geofence_bus)
        records = [_record(f"e{i}", [ENTER, {"zone": "JP-CORES", "kind": "ENTER"}]) for i in range(12)]
        assert sink.put([e for r in records for e in sink.entries({**r.fields})]).calls == 3
        aws.client("events").put_events(Entries=[{"Source": "other.app", "DetailType": "x", "Detail": "{}",
                                                  "EventBusName": aws.names.geofence_bus}])
        # THEN the log group holds exactly our 24 events, equal to the output's transitions
        received = read_received(aws.client("logs"), group)
        assert len(received) == 24 and compare(records, received).ok
        # AND the rule may write to the group: its resource policy names EventBridge and the rule alone
        (policy,) = [json.loads(p["policyDocument"]) for p in
                     aws.client("logs").describe_resource_policies()["resourcePolicies"]]
        (grant,) = policy["Statement"]
        assert grant["Principal"] == {"Service": "events.amazonaws.com"}
        assert grant["Condition"]["ArnEquals"]["aws:SourceArn"].endswith(f"rule/{aws.names.geofence_bus}/"
                                                                         f"{aws.names.geofence_bus}")
        # AND the report's reader, asked after more puts, gets those too
        sink.put(sink.entries({**records[0].fields, "event_id": "e100"}))
        assert len(GeofenceLog(aws.client("logs"), group).drain()) == 26
    finally:
        server.stop()


def test_reading_the_log_group_follows_every_page_and_keeps_an_unreadable_message() -> None:
    # GIVEN a Logs client whose group answers in two pages, the second with a message that is not JSON
    pages = {None: {"events": [{"message": json.dumps({"detail": {"IdempotencyKey": "k1"}})}], "nextToken": "t2"},
             "t2": {"events": [{"message": "not json"}]}}
    asked: list[str | None] = []

    class Logs:
        def filter_log_events(self, logGroupName: str, nextToken: str | None = None) -> dict[str, Any]:
            asked.append(nextToken)
            return pages[nextToken]

    # WHEN the report reads it
    received = read_received(Logs(), "/aws/events/g")
    # THEN both pages were read, and the unreadable message is kept (compare counts it as extra)
    assert asked == [None, "t2"]
    assert received == [{"detail": {"IdempotencyKey": "k1"}}, {"unreadable": "not json"}]
