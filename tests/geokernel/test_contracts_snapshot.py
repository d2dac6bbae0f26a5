"""The load snapshot contract: the layout, the data files and the manifest, byte for byte as the Spark job wrote them."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from geokernel.contracts.errors import ContractError
from geokernel.contracts.snapshot import (
    JOB_STARTED_MID_WINDOW,
    SnapshotFile,
    SnapshotManifest,
    SnapshotRow,
    data_file_bytes,
    data_file_key,
    is_manifest_key,
    manifest_checksum,
    manifest_key,
    snapshot_prefix,
)

END = datetime(2026, 1, 2, 3, 5, 0, 250000, tzinfo=UTC)
PREFIX = "snapshots/window_end=2026-01-02T03-05-00Z/"
FIRST = b"quadkey,events,cost\n00,30,\n000,12,\n001,18,20.5\n"
SECOND = b"quadkey,events,cost\n01,5,\n13,1,0.25\n"
# The manifest the Spark job wrote for these two files before the contract package existed (indent 2, final newline).
MANIFEST = (
    b'{\n  "format": "geo-rebalancer.snapshot/1",\n  "window_start": "2026-01-02T03:04:00Z",\n'
    b'  "window_end": "2026-01-02T03:05:00.250Z",\n  "grid_zoom": 2,\n  "zoom": 3,\n  "refine_events": 10,\n'
    b'  "rows": 5,\n  "total_events": 36,\n  "has_cost": true,\n  "batch_id": 7,\n  "files": [\n    {\n'
    b'      "key": "snapshots/window_end=2026-01-02T03-05-00Z/data/part-b00000007-00000.csv",\n      "rows": 3,\n'
    b'      "sha256": "2c411ad70f033104e47fd0adb9c00626ea873028a1e36bc48ccbf5eed1cb111c"\n    },\n    {\n'
    b'      "key": "snapshots/window_end=2026-01-02T03-05-00Z/data/part-b00000007-00001.csv",\n      "rows": 2,\n'
    b'      "sha256": "9e169146a72276d6f0331e933a321f01ef3ce79be55b57e331cad7001156fc82"\n    }\n  ],\n'
    b'  "checksum": "457477304a45035aa0f7510ec317942f4b5a5825d17b95818d96db80990efa66"\n}\n'
)


def _manifest() -> SnapshotManifest:
    files = tuple(SnapshotFile(data_file_key(PREFIX, 7, i), rows, hashlib.sha256(body).hexdigest())
                  for i, (body, rows) in enumerate(((FIRST, 3), (SECOND, 2))))
    return SnapshotManifest(datetime(2026, 1, 2, 3, 4, tzinfo=UTC), END, 2, 3, 10, 5, 36, True, 7, files,
                            manifest_checksum([f.sha256 for f in files]))


def test_the_layout_is_the_one_in_the_bucket() -> None:
    # GIVEN a window end WHEN its keys are built THEN they are the stored ones, and only the manifest triggers
    assert snapshot_prefix(END) == PREFIX
    assert data_file_key(PREFIX, 7, 1) == PREFIX + "data/part-b00000007-00001.csv"
    assert manifest_key(PREFIX) == manifest_key(PREFIX.rstrip("/")) == PREFIX + "_manifest.json"
    assert is_manifest_key(PREFIX + "_manifest.json")
    assert not is_manifest_key(PREFIX + "data/part-b00000007-00001.csv") and not is_manifest_key("x/_manifest.json")


def test_data_files_and_the_manifest_are_byte_identical_to_what_was_stored() -> None:
    # GIVEN the rows of two data files WHEN encoded THEN the bytes are the ones already in buckets
    rows = [SnapshotRow("00", 30, None), SnapshotRow("000", 12, None), SnapshotRow("001", 18, 20.5)]
    assert data_file_bytes(rows) == FIRST
    assert data_file_bytes([SnapshotRow("01", 5, None), SnapshotRow("13", 1, 0.25)]) == SECOND
    # AND the manifest too, and it reads back as the same record
    assert _manifest().to_json() == MANIFEST
    back = SnapshotManifest.from_json(MANIFEST, "m")
    assert back == _manifest() and back.window_end_iso == "2026-01-02T03:05:00Z"


def test_a_partial_window_is_stored_with_its_reason_and_reads_back_partial() -> None:
    # GIVEN the manifest of a window the job saw only part of (its run started mid-window)
    partial = replace(_manifest(), partial_reason=JOB_STARTED_MID_WINDOW)
    # WHEN stored and read back
    stored = json.loads(partial.to_json())
    back = SnapshotManifest.from_json(partial.to_json(), "m")
    # THEN it says so in two fields before its files, and reads back as the same partial record
    assert (stored["complete"], stored["partial_reason"]) == (False, "job_started_mid_window")
    assert list(stored)[-4:] == ["complete", "partial_reason", "files", "checksum"]
    assert back == partial and not back.complete
    # AND a complete window is stored without either field (the bytes of every manifest written before them), and
    # an explicit "complete": true reads as complete too
    assert "complete" not in json.loads(_manifest().to_json()) and _manifest().complete
    assert SnapshotManifest.from_dict({**json.loads(MANIFEST), "complete": True}, "m").complete


def test_a_manifest_without_the_writers_own_fields_still_reads() -> None:
    # GIVEN a manifest with no refine_events, batch_id or has_cost (the partitioner needs none of them)
    doc = json.loads(MANIFEST)
    for k in ("refine_events", "batch_id", "has_cost"):
        del doc[k]
    back = SnapshotManifest.from_dict(doc, "m")
    # THEN it reads, with those unknown and no cost column
    assert (back.refine_events, back.batch_id, back.has_cost) == (None, None, False)


@pytest.mark.parametrize(("change", "named"), [
    ({"format": "geo-rebalancer.snapshot/0"}, "'geo-rebalancer.snapshot/0'"),
    ({"window_end": "yesterday"}, "'yesterday'"),
    ({"window_end": "2026-01-02T03:00:00Z"}, "is before window_start"),
    ({"rows": -1}, "-1"),
    ({"total_events": True}, "True"),
    ({"has_cost": "yes"}, "'yes'"),
    ({"files": "all of them"}, "'all of them'"),
    ({"files": [{"key": "", "rows": 1, "sha256": "0" * 64}]}, "files[0]: needs a non-empty 'key'"),
    ({"checksum": "abc"}, "'abc'"),
    ({"complete": "no"}, "'complete' must be true or false, got 'no'"),
    ({"complete": False}, "complete=false needs a non-empty 'partial_reason', got None"),
    ({"complete": False, "partial_reason": ""}, "complete=false needs a non-empty 'partial_reason', got ''"),
    ({"partial_reason": JOB_STARTED_MID_WINDOW}, "a complete window has no 'partial_reason', got 'job_started"),
])
def test_a_malformed_manifest_is_refused_naming_where_and_the_value(change: dict[str, object], named: str) -> None:
    doc = {**json.loads(MANIFEST), **change}
    with pytest.raises(ContractError, match="^s3://b/m.*" + named.replace("[", r"\[").replace("]", r"\]")):
        SnapshotManifest.from_json(json.dumps(doc), "s3://b/m")


def test_text_that_is_not_a_manifest_is_refused() -> None:
    with pytest.raises(ContractError, match="not valid JSON"):
        SnapshotManifest.from_json(b"quadkey,events\n", "m")
    with pytest.raises(ContractError, match="expected a JSON object, got list"):
        SnapshotManifest.from_json(b"[]", "m")
