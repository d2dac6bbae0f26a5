"""local.output: the records read from the enriched output, and the delivery check."""

from __future__ import annotations

import json

import boto3
from moto import mock_aws

from geokernel.contracts.enriched import EnrichedRecord, encode_lines, enriched_key
from local.output import EnrichedReader, OutRecord, Processed, delivery

T0 = 1_763_700_000_000  # 2025-11-21T04:40:00Z


def test_record_from_an_enriched_line() -> None:
    # GIVEN an enriched line's object WHEN read THEN the entity, process, version and the point's zoom-12 cell are kept
    line = EnrichedRecord.from_dict({"event_id": "e1", "entity_id": "car-1", "spec_version": 3, "worker_id": "w0002",
                                     "partition_id": "p0001", "owner": "h:12:ab", "processed_at": 1000,
                                     "lat": 48.8566, "lon": 2.3522}, "k")
    r = Processed.from_record(line)
    assert (r.entity, r.version, r.owner, r.processed_ms, len(r.cell)) == ("car-1", 3, "h:12:ab", 1000, 12)
    assert r.cell.startswith("12022001")


def _rec(eid: str, worker: str = "w0001", version: int = 1, ts_ms: int = 0) -> OutRecord:
    return OutRecord(eid, version, worker, "p0001", ts_ms, ts_ms + 500)


def test_delivery_counts_lost_duplicates_and_unexpected() -> None:
    # GIVEN three events sent; out: e1 twice (blue and green), e2 once, and an id nobody sent
    records = [_rec("e1"), _rec("e1", version=2), _rec("e2"), _rec("zz")]
    # WHEN compared
    d = delivery(["e1", "e2", "e3"], records)
    # THEN e3 is lost, zz unexpected, and the e1 duplicate is removed by dedupe
    assert (d.lost, d.unexpected, d.duplicates, d.out_unique) == (1, 1, 1, 3)
    assert d.lost_sample == ("e3",) and not d.ok


def test_the_reader_reads_each_hours_objects_and_names_a_record_outside_its_hour() -> None:
    # GIVEN an output bucket holding one flush of 04:xx UTC (e1, e2), an event of 05:00 filed under 04:xx, and an
    # object that is not gzip'd
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="out")

        def line(eid: str, ts: int) -> str:
            return json.dumps({"event_id": eid, "entity_id": "car-1", "ts": ts, "lat": 48.85, "lon": 2.35,
                               "spec_version": 3, "worker_id": "w0002", "partition_id": "p1", "owner": "h:1:a",
                               "processed_at": T0 + 9})

        good = enriched_key(T0, 3, "w0002", T0 + 10_000)
        misfiled = enriched_key(T0, 3, "w0002", T0 + 20_000)
        s3.put_object(Bucket="out", Key=good, Body=encode_lines([line("e1", T0), line("e2", T0 + 1)]))
        s3.put_object(Bucket="out", Key=misfiled, Body=encode_lines([line("e3", T0 + 1_200_000)]))
        s3.put_object(Bucket="out", Key=enriched_key(T0, 3, "w0002", T0 + 30_000), Body=line("e4", T0).encode())
        reader = EnrichedReader(s3, "out")
        # WHEN it reads the output
        got = reader.refresh()
        # THEN every readable record counts, with its send and write times
        assert got == 3 and reader.ids == {"e1", "e2", "e3"}
        assert [(r.ts_ms, r.written_ms) for r in reader.records[:2]] == [(T0, T0 + 10_000), (T0 + 1, T0 + 10_000)]
        # AND the misfiled record and the body that is not gzip'd are problems naming their keys
        assert len(reader.problems) == 2
        assert any(p.startswith(misfiled) and "'enriched/dt=2025-11-21/hour=05/'" in p for p in reader.problems)
        assert any("not gzip'd" in p for p in reader.problems)
        # AND a second read reads nothing again (objects are written once)
        assert reader.refresh() == 0
