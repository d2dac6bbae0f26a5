"""The reverse geocoder's places file: its header, and the admin1 and timezone columns carried to the places."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from geo_service.pipeline.places import PLACES_HEADER, PLACES_PATH, load_places, scan_places
from geo_service.pipeline.transform import TransformError

OLD_HEADER = "quadkey,lat,lon,name,country,population"


def test_a_places_file_with_the_old_header_is_refused_in_one_line_naming_the_header(tmp_path: Path) -> None:
    # GIVEN a places file written before the admin1 and timezone columns (the old header, six columns a row)
    old = tmp_path / "old.csv.gz"
    old.write_bytes(gzip.compress(f"{OLD_HEADER}\n0,1.0,2.0,A,AA,10\n".encode()))
    # WHEN it is loaded
    with pytest.raises(TransformError) as err:
        load_places([""], old)
    # THEN it is refused with one line naming the header it needs and the header it found
    message = str(err.value)
    assert "\n" not in message
    assert f"header must be {PLACES_HEADER!r}, got {OLD_HEADER!r}" in message and "old.csv.gz" in message


def test_the_shipped_places_carry_admin1_keys_and_time_zones() -> None:
    # GIVEN the places file shipped in the package, read whole
    places = scan_places([""], ())
    # WHEN its admin1 and timezone columns are inspected
    london = next(i for i, (n, c) in enumerate(zip(places.name, places.country, strict=True))
                  if (n, c) == ("London", "GB"))
    # THEN every place has a time zone, every admin1 key starts with its country code (93 places have none),
    # and London is in England on London time
    assert places.admin1[london] == "GB.ENG" and places.timezone[london] == "Europe/London"
    assert len(places.admin1) == len(places.timezone) == len(places) == 147_283
    assert all(places.timezone) and sum(1 for a in places.admin1 if not a) == 93
    assert all(a.startswith(c + ".") for a, c in zip(places.admin1, places.country, strict=True) if a)
    with gzip.open(PLACES_PATH, "rt", encoding="utf-8") as f:
        assert f.readline().strip() == PLACES_HEADER == OLD_HEADER + ",admin1,timezone"
