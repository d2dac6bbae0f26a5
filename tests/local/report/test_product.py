"""local.report.product: the kept output, queried per hour with pyarrow, each event once, against the oracle's count."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
from moto import mock_aws

from geokernel.contracts.enriched import HOUR_MS, encode_lines, enriched_key, event_hour
from local.report.product import KEPT_DIR, Kept, answer, first_copies, keep, product_of, read_hour, section

T0 = 1_763_700_000_000  # 2025-11-21T04:40:00Z
H4 = event_hour(T0)


def _line(eid: str, ts: int, processed_at: int, version: int = 1, worker: str = "w0001") -> str:
    return json.dumps({"event_id": eid, "entity_id": "car-1", "ts": ts, "lat": 48.85, "lon": 2.35, "place": {"a": 1},
                       "spec_version": version, "worker_id": worker, "partition_id": "p1", "stray": False,
                       "owner": "h:1:a", "processed_at": processed_at})


def _write(root: Path, key: str, lines: list[str]) -> None:
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_lines(lines))


def _bucket(root: Path) -> None:
    """Hour 04 written by two versions and three slots: e1 three times (v1 w0001, v2 w0002 earlier, v2 w0003), e2,
    e3 once; hour 05: e4; a record of another transform with other fields in hour 04."""
    _write(root, enriched_key(T0, 1, "w0001", T0 + 10_000), [_line("e1", T0, T0 + 9_000), _line("e2", T0 + 1, 5)])
    _write(root, enriched_key(T0, 2, "w0002", T0 + 20_000, 1), [_line("e1", T0, T0 + 8_000, 2, "w0002")])
    _write(root, enriched_key(T0, 2, "w0003", T0 + 30_000), [_line("e1", T0, T0 + 9_500, 2, "w0003"),
                                                             '{"event_id": "e3", "other": [1, 2], "processed_at": 1}'])
    _write(root, enriched_key(T0 + HOUR_MS, 2, "w0002", T0 + HOUR_MS), [_line("e4", T0 + HOUR_MS, 7, 2, "w0002")])


def test_an_hour_is_read_from_its_folder_alone_and_each_event_is_kept_once_as_the_view_does(tmp_path: Path) -> None:
    # GIVEN a kept output bucket with hours 04 and 05 written by several versions and slots
    _bucket(tmp_path)
    # WHEN hour 04 is read with pyarrow
    table, objects = read_hour(tmp_path, H4)
    # THEN its 5 records in 3 objects come back with the partition columns, nothing of hour 05
    assert (table.num_rows, objects) == (5, 3)
    assert set(table.column("hour").to_pylist()) == {"04"} and set(table.column("dt").to_pylist()) == {"2025-11-21"}
    # AND the dedupe keeps each event once: e1's first copy is the one processed first (v2 w0002)
    first = {r["event_id"]: r for r in first_copies(table).to_pylist()}
    assert sorted(first) == ["e1", "e2", "e3"]
    assert (first["e1"]["worker_id"], first["e1"]["processed_at"]) == ("w0002", T0 + 8_000)


def test_each_hour_is_compared_with_the_oracles_count(tmp_path: Path) -> None:
    # GIVEN the bucket and the oracle's counts: 3 events at 04, 1 at 05, 2 at 06 (none written)
    _bucket(tmp_path)
    oracle = {H4: 3, H4 + HOUR_MS: 1, H4 + 2 * HOUR_MS: 2}
    # WHEN every hour is queried
    got = answer(tmp_path, oracle)
    # THEN 04 and 05 match, 06 has no folder and differs
    assert [(h.events, h.records, h.objects, h.oracle, h.ok) for h in got] == [
        (3, 5, 3, 3, True), (1, 1, 1, 1, True), (0, 0, 0, 2, False)]
    assert got[0].line().startswith("hour 2025-11-21T04:00Z: 3 events (pyarrow, ")
    assert got[0].line().endswith("s); the oracle's count 3 (5 records in 3 objects: 2 copies removed)")


def test_a_run_keeps_its_buckets_as_a_deployment_lays_them_out_and_the_report_queries_them(tmp_path: Path) -> None:
    # GIVEN a moto output bucket holding an hour's object and a snapshots bucket holding a manifest
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        for bucket in ("out", "snaps"):
            s3.create_bucket(Bucket=bucket)
        key = enriched_key(T0, 1, "w0001", T0 + 10_000)
        s3.put_object(Bucket="out", Key=key, Body=encode_lines([_line("e1", T0, 1), _line("e1", T0, 2)]))
        s3.put_object(Bucket="out", Key="state/v1/w0001/latest.json", Body=b"{}")
        s3.put_object(Bucket="snaps", Key="snapshots/window_end=2025-11-21T04-40-00Z/_manifest.json", Body=b"{}")
        # WHEN the run keeps them
        kept = [keep(s3, "out", "output", tmp_path), keep(s3, "snaps", "snapshots", tmp_path)]
    # THEN each object of the enriched output and the snapshots is a file at <out>/s3/<role>/<key>, nothing else
    assert [(k.role, k.objects) for k in kept] == [("output", 1), ("snapshots", 1)]
    assert (tmp_path / KEPT_DIR / "output" / key).is_file()
    assert (tmp_path / KEPT_DIR / "snapshots/snapshots/window_end=2025-11-21T04-40-00Z/_manifest.json").is_file()
    assert not (tmp_path / KEPT_DIR / "output" / "state").exists()
    # AND the report's section answers the hour with the oracle's count
    p = product_of(tmp_path, kept, {H4: 1})
    assert p.ok and [h.events for h in p.hours] == [1]
    lines = section(p, tmp_path)
    assert lines[1].startswith("  kept: output 1 objects") and lines[2].startswith("  hour 2025-11-21T04:00Z: 1 events")


def test_without_an_oracle_or_a_kept_output_nothing_is_claimed(tmp_path: Path) -> None:
    # GIVEN no oracle, then no kept output WHEN the product is asked for THEN it is not ok and says why
    assert product_of(tmp_path, [Kept("output", "b", 0, 0)], None).error == (
        "no oracle to compare with (the reference run failed)")
    assert not product_of(tmp_path, [], {H4: 1}).ok
