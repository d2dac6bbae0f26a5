"""The router on the shared table of event times (tests/events/ts_units.json), deployed with each ts_unit."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from geokernel import timestamps
from geokernel.contracts.env import EnvVar
from geokernel.contracts.event_fields import EventFields
from geokernel.contracts.timestamps import TsUnit
from lambdas.router import handler as router_handler
from tests.events.ts_units import EXPECTS, NOW_MS, Expect
from tests.lambdas.conftest import CTX, Aws, load_event, make_spec
from tests.lambdas.test_router import activate, stream_records


def kinesis_batch(expects: list[Expect]) -> dict[str, Any]:
    """The recorded batch's shape with one record per case: its event, sequence number ``<index>``."""
    template = load_event("kinesis_ingest_batch.json")["Records"][0]
    records = []
    for i, e in enumerate(expects):
        r = copy.deepcopy(template)
        r["kinesis"].update(data=base64.b64encode(json.dumps(e.event(i)).encode()).decode(), sequenceNumber=str(i),
                            partitionKey="u1")
        r["eventID"] = f"shardId-000000000000:{i}"
        records.append(r)
    return {"Records": records}


@pytest.mark.parametrize("unit", list(TsUnit))
def test_the_shared_time_unit_table(aws: Aws, unit: TsUnit, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the router deployed with the unit in EVENT_FIELDS (as the stack sets it), spec v1 active, its clock at
    # the table's now, and one record per case of the table
    monkeypatch.setenv(EnvVar.EVENT_FIELDS, EventFields(ts_unit=unit).to_json())
    monkeypatch.setattr(timestamps, "now_ms", lambda: NOW_MS)
    activate(aws, make_spec(1))
    router_handler.runtime.cache_clear()
    mine = [e for e in EXPECTS if e.unit is unit]
    # WHEN the router handles the batch
    try:
        out = router_handler.handler(kinesis_batch(mine), CTX)
    finally:
        router_handler.runtime.cache_clear()
    # THEN the valid cases are on the geo stream as sent, and the others quarantined with the table's reason
    assert out == {"batchItemFailures": []}
    routed = {rec["event_id"]: rec for _, rec, _ in stream_records(aws, "georebal-geo-v1")}
    reasons: dict[str, str] = {}
    for key in aws.keys(aws.cfg.quarantine_bucket, "quarantine/router/"):
        body = aws.clients.s3.get_object(Bucket=aws.cfg.quarantine_bucket, Key=key)["Body"].read().decode()
        for line in body.splitlines():
            rec = json.loads(line)
            reasons[json.loads(rec["raw"])["event_id"]] = rec["reason"]
    wrong = []
    for i, e in enumerate(mine):
        eid = e.event(i)["event_id"]
        got = e.ms if eid in routed else None  # the router keeps the bytes: a routed case has the table's time
        if (eid in routed) != (e.ms is not None) or e.verdict(got, reasons.get(eid)) is not None:
            wrong.append((e.id, reasons.get(eid, "routed")))
        elif eid in routed:
            assert routed[eid]["ts"] == e.ts and "ts_ms" not in routed[eid]
    assert not wrong, wrong
