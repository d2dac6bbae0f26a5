"""What the workers write (cost reports, enriched records, quarantine) and the stream manifest: the stored forms."""

from __future__ import annotations

import json
import re

import pytest

from geokernel.contracts.cost import CostReportRecord
from geokernel.contracts.dynamo import plain_item
from geokernel.contracts.enriched import EnrichedRecord
from geokernel.contracts.errors import ContractError
from geokernel.contracts.quarantine import QuarantineRecord
from geokernel.contracts.stream import ShardRange, StreamManifest


def test_the_stream_manifest_is_byte_identical_and_reads_back() -> None:
    manifest = StreamManifest(4, "g-geo-v4", (ShardRange("shardId-0", 0, 10, 5, True, ("p",)),
                                              ShardRange("s1", 11, 20, 6)))
    stored = ('{"shards": [{"closed": true, "ending_hash_key": "10", "parents": ["p"], "shard_id": "shardId-0", '
              '"starting_hash_key": "0", "starting_sequence": "5"}, {"closed": false, "ending_hash_key": "20", '
              '"parents": [], "shard_id": "s1", "starting_hash_key": "11", "starting_sequence": "6"}], '
              '"stream_name": "g-geo-v4", "version": 4}')
    assert manifest.to_json() == stored and StreamManifest.from_json(stored, "s") == manifest
    with pytest.raises(ContractError, match="s3://b/k: not a stream manifest"):
        StreamManifest.from_json(b"{}", "s3://b/k")


def test_a_cost_report_is_the_json_body_the_workers_wrote() -> None:
    report = CostReportRecord(7, "w0002", ("p0003",), 10.5, 0.002, 12, {"B": 50.0, "A": 37.5}, {"B": 1, "A": 4}, 20.5)
    body = ('{"version": 7, "worker": "w0002", "partition_ids": ["p0003"], "interval_s": 10.5, "calibration": 0.002, '
            '"quadkey_zoom": 12, "rates": {"A": 37.5, "B": 50.0}, "events": {"A": 4, "B": 1}, "reported_at": 20.5}')
    assert json.dumps(report.to_dict()) == body
    assert CostReportRecord.from_json(body, "k") == report
    with pytest.raises(ContractError, match=r"costs/v7/w/1\.json: cost report lacks \['version', 'worker', "):
        CostReportRecord.from_json('{"rates": {}}', "costs/v7/w/1.json")
    # AND each bad value is named: a rate that is not a finite number >= 0, a count that is not an integer >= 0,
    # a calibration that is not positive
    for field, value, message in (("rates", {"A": float("nan")}, "quadkey 'A': rate must be a finite number >= 0"),
                                  ("rates", {"A": True}, "quadkey 'A': rate must be a finite number >= 0, got True"),
                                  ("events", {"A": -1}, "quadkey 'A': event count must be an integer >= 0, got -1"),
                                  ("calibration", 0, "calibration must be > 0, got 0.0")):
        with pytest.raises(ContractError, match=re.escape(message)):
            CostReportRecord.from_dict({**report.to_dict(), field: value}, "k")


def test_an_enriched_record_keeps_the_events_fields_and_the_routing_ids_win() -> None:
    record = EnrichedRecord("e1", 3, "p0001", "w0002", False, owner="h:1:a", processed_at=17,
                            fields={"ts": 5, "lat": 1.0, "place": "X"})
    doc = record.to_dict()
    assert list(doc) == ["ts", "lat", "place", "event_id", "spec_version", "partition_id", "worker_id", "stray",
                         "owner", "processed_at"]
    assert EnrichedRecord.from_dict(json.loads(json.dumps(doc)), "k") == record
    assert "owner" not in EnrichedRecord("e1", 3, "p0001", "w0002", True).to_dict()
    with pytest.raises(ContractError, match="k line 2: not an enriched record"):
        EnrichedRecord.from_dict({"event_id": "e1"}, "k line 2")


def test_a_quarantine_record_has_the_contract_fields_in_order() -> None:
    record = QuarantineRecord("bad_type: lat must be a JSON number, got 'x'", '{"lat": "x"}', "f:1", "t")
    assert list(record.to_dict()) == ["reason", "raw", "source", "quarantined_at"] and record.code == "bad_type"
    assert QuarantineRecord.from_dict(record.to_dict(), "k") == record
    with pytest.raises(ContractError, match="k: a quarantine record needs a 'reason'"):
        QuarantineRecord.from_dict({}, "k")


def test_attribute_values_read_as_the_lambdas_adapter_reads_them() -> None:
    item = {"n": {"N": "3"}, "f": {"N": "3.5"}, "e": {"N": "1e2"}, "s": {"S": "x"}, "b": {"BOOL": True},
            "z": {"NULL": True}, "m": {"M": {"k": {"L": [{"N": "1"}]}}}, "ss": {"SS": ["a"]}}
    assert plain_item(item) == {"n": 3, "f": 3.5, "e": 100.0, "s": "x", "b": True, "z": None, "m": {"k": [1]},
                                "ss": ["a"]}
    with pytest.raises(ContractError, match="'B'"):
        plain_item({"x": {"B": b"1"}})
