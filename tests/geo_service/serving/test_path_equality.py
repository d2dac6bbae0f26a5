"""The worker's batch path writes the records the per-event path wrote before issue #60, byte for byte."""

from __future__ import annotations

import gzip
from pathlib import Path

import path_kit
import pytest

from geo_service.pipeline.transform import GeoTransform, ReverseGeocoder
from transforms.geofence_state import GeofenceState

DATA = Path(__file__).with_name("data")


def golden(name: str) -> list[str]:
    with gzip.open(DATA / f"golden-{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        return f.read().splitlines()


@pytest.mark.parametrize(("name", "make"), [("reverse-geocoder", ReverseGeocoder), ("geofence-state", GeofenceState)])
@pytest.mark.parametrize("size", [500, 37])
def test_the_batch_path_writes_the_same_records_as_the_per_event_path_before_it(name: str, make: type[GeoTransform],
                                                                                size: int) -> None:
    # GIVEN 3,000 events around London and the world and the records either codec could read or write differently
    # (path_kit.edge_cases), and the lines the per-event path wrote for them before the batch path (golden files)
    raw = path_kit.events()
    # WHEN the real batch path processes them in batches of 500 (and of 37: the same records, other batch edges)
    lines = path_kit.run_path(make(), raw, size)
    # THEN every line is the same, byte for byte, in the same order (quarantine reasons included)
    expected = golden(name)
    if size != 500:  # processed_at counts batches: compare the lines without it
        lines, expected = [_without_time(x) for x in lines], [_without_time(x) for x in expected]
    assert len(lines) == len(expected)
    assert [i for i, (a, b) in enumerate(zip(lines, expected, strict=True)) if a != b] == []


def _without_time(line: str) -> str:
    head, sep, _tail = line.partition(',"processed_at":')
    return head if sep else line
