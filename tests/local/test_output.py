"""local.output: the records read from the enriched output, and the delivery check."""

from __future__ import annotations

from geokernel.contracts.enriched import EnrichedRecord
from local.output import OutRecord, Processed, delivery


def test_record_from_an_enriched_line() -> None:
    # GIVEN an enriched line's object WHEN read THEN the entity, process, version and the point's zoom-12 cell are kept
    line = EnrichedRecord.from_dict({"event_id": "e1", "entity_id": "car-1", "spec_version": 3, "worker_id": "w0002",
                                     "partition_id": "p0001", "owner": "h:12:ab", "processed_at": 1000,
                                     "lat": 48.8566, "lon": 2.3522}, "enriched/v3/w0002/1.jsonl")
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
