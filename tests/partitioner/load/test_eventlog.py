"""Tests for partitioner.load.eventlog: events counted per window and quadkey, bad rows named or skipped."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from pathlib import Path

import mercantile
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geokernel.errors import EventLogError
from geokernel.geo.tiles import quadkey, tile
from partitioner.load.eventcols import EventColumns
from partitioner.load.eventlog import (
    CountOptions,
    check_rows,
    count_events,
    window_csv,
    window_name,
    window_start_of_name,
)
from partitioner.load.eventread import read_event_table
from partitioner.load.eventtimes import epoch_ms

lons = st.floats(-180.0, 180.0, allow_nan=False)
lats = st.floats(-85.05112878, 85.05112878, allow_nan=False)


def _quadkeys(tmp_path: Path, points: list[tuple[float, float]], zoom: int) -> list[str]:
    f = tmp_path / "p.csv"
    f.write_text("lat,lon,ts\n" + "".join(f"{lat!r},{lon!r},{1733574037 + i}\n" for i, (lon, lat) in enumerate(points)))
    result = count_events([f], EventColumns(), CountOptions(1e9, zoom))
    text = window_csv(result.counts, result.counts.windows()[0])
    return sorted(line.split(",")[0] for line in text.splitlines()[1:])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(lons, lats), min_size=1, max_size=20), st.integers(1, 24))
def test_quadkeys_are_the_scalar_tiles_and_mercantiles(tmp_path_factory: pytest.TempPathFactory,
                                                       points: list[tuple[float, float]], zoom: int) -> None:
    # GIVEN points anywhere on the mercator square
    tmp = tmp_path_factory.mktemp("qk")
    # WHEN counted at a zoom
    got = _quadkeys(tmp, points, zoom)
    # THEN every quadkey is the scalar library's and mercantile's for that point
    assert got == sorted({quadkey(tile(lon, lat, zoom)) for lon, lat in points})
    assert got == sorted({mercantile.quadkey(mercantile.tile(lon, lat, zoom)) for lon, lat in points})


def test_windows_are_floor_of_time_over_window_and_gaps_are_kept(tmp_path: Path) -> None:
    # GIVEN events at T, T + 59999 ms, T + 60 ms and T + 180 s (ISO), T = 2024-12-07T12:19:00Z
    t = 1_733_573_940_000
    f = tmp_path / "e.csv"
    f.write_text(f"lat,lon,ts\n10,10,{t}\n10,10,{t + 59999}\n10,10,{t + 60}\n10,10,2024-12-07T12:22:00Z\n")
    # WHEN counted in 60 s windows (ts_unit auto: the numbers are milliseconds by their magnitude)
    r = count_events([f], EventColumns(), CountOptions(60, 4))
    # THEN windows T/60 s and 3 later hold the events, the two between are empty but listed
    w0 = t // 60_000
    assert list(r.counts.windows()) == [w0, w0 + 1, w0 + 2, w0 + 3]
    assert r.counts.window.tolist() == [w0, w0 + 3] and r.counts.count.tolist() == [3, 1]
    assert window_name(r.counts, w0 + 3) == "20241207T122200Z.csv"
    assert window_csv(r.counts, w0 + 1).endswith(",0\n")  # an empty window: one zero-weight row
    # AND the name gives the window's start back (simulate's clock), other names none
    assert window_start_of_name(window_name(r.counts, w0 + 3)) == t / 1000 + 180.0
    assert window_start_of_name("20260516T140000.250Z.csv") == 1_778_940_000.25
    assert window_start_of_name("window-003.csv") is None and window_start_of_name("20260516T1400Z.csv") is None


def test_times_in_seconds_milliseconds_and_iso_agree() -> None:
    # GIVEN the same instant written four ways
    import pyarrow as pa

    col = pa.array(["1700000000", "1700000000000", "2023-11-14T22:13:20Z", "2023-11-14T23:13:20+01:00", "x", None])
    # WHEN converted
    ms, codes = epoch_ms(col)
    # THEN they agree, and the bad and missing ones are flagged
    assert ms[:4].tolist() == [1_700_000_000_000] * 4
    assert codes.tolist()[:4] == [0, 0, 0, 0] and codes[4] != 0 and codes[5] != 0


def test_first_bad_row_names_file_line_and_value(tmp_path: Path) -> None:
    # GIVEN a CSV with a blank line and then a latitude out of range on line 4
    f = tmp_path / "e.csv"
    f.write_text("lat,lon,ts\n1,2,1733574037\n\n91.5,2,1733574037\n")
    # WHEN counted
    with pytest.raises(EventLogError) as err:
        count_events([f], EventColumns(), CountOptions(60, 10))
    # THEN the message names the file, line 4 and the value
    assert f"{f} line 4: lat_out_of_range: lat 91.5 not in" in str(err.value)


def test_skip_bad_counts_reasons_and_keeps_the_rest(tmp_path: Path) -> None:
    # GIVEN JSON lines with one good event and three bad ones
    f = tmp_path / "e.jsonl"
    f.write_text('{"lat": 1, "lon": 2, "ts": 1733574037}\n{"lat": "a", "lon": 2, "ts": 1733574037}\nnot json\n'
                 '{"lat": 1, "lon": 200, "ts": 1733574037}\n')
    # WHEN counted skipping bad rows
    r = count_events([f], EventColumns(), CountOptions(60, 10, skip_bad=True))
    # THEN one event counts and the bad rows are kept with their lines and reasons
    assert r.events == 1
    assert [(b.line, b.reason.split(":")[0]) for b in r.bad] == [(2, "bad_type"), (3, "unparsable_json"),
                                                                (4, "lon_out_of_range")]
    assert r.bad[0].quarantine("t").source == f"{f}:2"


def test_a_missing_column_names_it_and_the_files_columns(tmp_path: Path) -> None:
    # GIVEN a file without the mapped time column
    f = tmp_path / "e.csv"
    f.write_text("lat,lon,when\n1,2,3\n")
    # WHEN counted THEN the error names the column, its option and the file's columns
    with pytest.raises(EventLogError, match=r"no column 'ts' \(--time\); the file has columns \['lat', 'lon', 'when'\]"):
        count_events([f], EventColumns(), CountOptions(60, 10))


def test_a_missing_column_under_a_known_name_says_which_option_to_pass(tmp_path: Path) -> None:
    # GIVEN an AIS log as MarineCadastre writes it (LAT, LON, BaseDateTime, MMSI) and one with two x-like columns
    ais = tmp_path / "ais.csv"
    ais.write_text("MMSI,BaseDateTime,LAT,LON,SOG\n1,2024-01-01T00:00:00,40.5,-70.1,3.2\n")
    both = tmp_path / "both.csv"
    both.write_text("x,lng,lat,timestamp\n1,2,3,4\n")
    # WHEN counted with the default mapping
    # THEN the error names the options that map each missing column, in one line
    with pytest.raises(EventLogError, match=r"no column 'lat' \(--lat\);.*; pass --lat LAT --lon LON --time BaseDateTime --entity MMSI$"):
        count_events([ais], EventColumns(), CountOptions(60, 10))
    # AND a column with two candidates (x, lng) is not guessed: only --time is suggested
    with pytest.raises(EventLogError, match=r"no column 'lon' \(--lon\);.*; pass --time timestamp$"):
        count_events([both], EventColumns(), CountOptions(60, 10))
    # AND the suggested mapping counts the file
    r = count_events([ais], EventColumns(lat="LAT", lon="LON", time="BaseDateTime"), CountOptions(60, 10))
    assert r.events == 1


def test_a_file_without_a_header_line_is_named_as_such(tmp_path: Path) -> None:
    # GIVEN a CSV whose first line is data (T-Drive taxi logs: id, time, lon, lat, no header)
    f = tmp_path / "taxi.csv"
    f.write_text("1,2008-02-02 15:36:08,116.51172,39.92123\n1,2008-02-02 15:46:08,116.51135,39.93883\n")
    # WHEN counted THEN the error names the missing column, the first line's fields and what to add
    with pytest.raises(EventLogError, match=r"no column 'lat' \(--lat\); the file has columns \['1', .*its first "
                                            r"line looks like data, not column names \(the number '1'\): name its 4 "
                                            r"columns in order with --columns, e.g. --columns entity_id,ts,lon,lat "):
        count_events([f], EventColumns(), CountOptions(60, 10))


def test_columns_name_a_headerless_files_columns_and_its_lines_start_at_1(tmp_path: Path) -> None:
    # GIVEN T-Drive's taxi log without a header, a bad latitude on line 2, and the same rows under a header line
    rows = "1,2008-02-02 15:36:08,116.51172,39.92123\n1,2008-02-02 15:36:10,116.5,95\n2,2008-02-02 15:46:08,116.51135,39.93883\n"
    bare, headed = tmp_path / "taxi.txt", tmp_path / "headed.csv"
    bare.write_text(rows)
    headed.write_text("entity_id,ts,lon,lat\n" + rows)
    named = EventColumns(names=("entity_id", "ts", "lon", "lat"))
    # WHEN the bare file is counted with its columns named, and the headed one as it is
    a = count_events([bare], named, CountOptions(60, 10, skip_bad=True))
    b = count_events([headed], EventColumns(), CountOptions(60, 10, skip_bad=True))
    # THEN both count the same two events of two taxis, and the bad row is line 2 of the bare file (3 of the other)
    assert a.events == b.events == 2 and a.entities == b.entities == 2
    assert a.counts.code.tolist() == b.counts.code.tolist() and a.counts.window.tolist() == b.counts.window.tolist()
    assert [x.line for x in a.bad] == [2] and [x.line for x in b.bad] == [3]
    assert a.bad[0].raw == "1,2008-02-02 15:36:10,116.5,95"


def test_columns_are_refused_for_files_with_named_columns_and_when_named_twice(tmp_path: Path) -> None:
    # GIVEN a JSON lines file
    f = tmp_path / "e.jsonl"
    f.write_text('{"lat": 1, "lon": 2, "ts": 1733574037}\n')
    # WHEN read with --columns THEN the error says --columns is for headerless CSV files
    with pytest.raises(EventLogError, match=r"--columns names the columns of a CSV file without a header line; .* is "
                                            r"JSON lines"):
        read_event_table(f, EventColumns(names=("lat", "lon", "ts")))
    # AND a CSV file whose first line names its columns is told to leave --columns out
    headed = tmp_path / "e.csv"
    headed.write_text("id,ts,lon,lat\n1,2008-02-02 15:36:08,116.51172,39.92123\n")
    with pytest.raises(EventLogError, match=r"line 1 names columns \(\['id', 'ts', 'lon', 'lat'\]\), but --columns "
                                            r"says the file has no header line: leave --columns out"):
        read_event_table(headed, EventColumns(names=("entity_id", "ts", "lon", "lat")))
    # AND a name given twice, or an empty one, is named
    with pytest.raises(EventLogError, match=r"--columns 'lat,lat,ts': 'lat' is named twice"):
        EventColumns(names=("lat", "lat", "ts"))
    with pytest.raises(EventLogError, match=r"a column name is empty"):
        EventColumns(names=("lat", "", "ts"))


@pytest.mark.parametrize(("name", "sep"), [("e.csv", ";"), ("e.csv", "\t"), ("e.csv", "|"), ("e.tsv", "\t")])
def test_semicolon_tab_and_pipe_separated_files_count_as_the_comma_separated_one(tmp_path: Path, name: str,
                                                                                  sep: str) -> None:
    # GIVEN the same rows comma separated and separated by sep, with a row of too many fields on line 3 and a
    # latitude out of range on line 4 (the European export's decimal point is a dot here)
    rows = [["lat", "lon", "ts", "entity_id"], ["51.5", "-0.12", "1733574060", "a"],
            ["51.5", "-0.12", "1733574061", "b", "x"], ["95", "-0.12", "1733574062", "c"], ["51.6", "-0.13", "1733574125", "a"]]
    comma, other = tmp_path / "c.csv", tmp_path / name
    comma.write_text("".join(",".join(r) + "\n" for r in rows))
    other.write_text("".join(sep.join(r) + "\n" for r in rows))
    # WHEN both are counted skipping bad rows
    a = count_events([comma], EventColumns(), CountOptions(60, 10, skip_bad=True))
    b = count_events([other], EventColumns(), CountOptions(60, 10, skip_bad=True))
    # THEN they count alike, and the bad rows are the same lines with the same reasons
    assert b.events == a.events == 2 and b.entities == a.entities == 1
    for x, y in ((a.counts.window, b.counts.window), (a.counts.code, b.counts.code), (a.counts.count, b.counts.count)):
        assert x.tolist() == y.tolist()
    assert [(x.line, x.reason) for x in b.bad] == [(x.line, x.reason) for x in a.bad]
    assert [x.line for x in b.bad] == [3, 4] and "line has 5 fields, the header has 4" in b.bad[0].reason


def test_a_directory_is_named_as_one(tmp_path: Path) -> None:
    # GIVEN a directory of daily files passed as the event file WHEN counted
    # THEN the error says it is a directory and how to name its files
    with pytest.raises(EventLogError, match=r"is a directory: name the files in it \('counts' reads several"):
        count_events([tmp_path], EventColumns(), CountOptions(60, 10))


def test_a_decimal_comma_is_named_as_such(tmp_path: Path) -> None:
    # GIVEN a semicolon separated export whose numbers have a decimal comma
    f = tmp_path / "e.csv"
    f.write_text("lat;lon;ts\n51,5;-0,12;60\n")
    # WHEN counted THEN the error names the line, the value and the likely cause
    with pytest.raises(EventLogError, match=r"line 2: bad_type: lat '51,5' is not a number \(a decimal comma\?"):
        count_events([f], EventColumns(), CountOptions(60, 10))


def test_a_header_without_any_separator_is_one_column(tmp_path: Path) -> None:
    # GIVEN a file whose header names one column (a separator the reader does not know: a colon)
    f = tmp_path / "e.csv"
    f.write_text("lat:lon:ts\n1:2:3\n")
    # WHEN counted THEN the error names the one column the reader saw
    with pytest.raises(EventLogError, match=r"no column 'lat' \(--lat\); the file has columns \['lat:lon:ts'\]"):
        count_events([f], EventColumns(), CountOptions(60, 10))


def test_bad_options_are_refused() -> None:
    # GIVEN a window that is not whole milliseconds, and a zoom of 0
    # WHEN checked THEN each is named
    with pytest.raises(EventLogError, match=r"0\.0001"):
        CountOptions(0.0001, 10).check()
    with pytest.raises(EventLogError, match="--zoom 0"):
        CountOptions(60, 0).check()
    assert np.int64(CountOptions(0.5, 3).window_ms) == 500


def test_check_rows_describes_every_bad_row_without_raising(tmp_path: Path) -> None:
    # GIVEN a file with two good rows, a bad latitude, a bad time and a row with too many fields
    f = tmp_path / "e.csv"
    f.write_text("lat,lon,ts\n1.5,2.5,1700000000\n91,2,1700000000\n1,2,soon\n1,2,3,4\n-1,-2,1700000000123\n")
    # WHEN every row is checked
    checked = check_rows(read_event_table(f, EventColumns()), EventColumns())
    # THEN the good rows' values are there, and every bad row is named by line, in line order
    assert checked.ok.tolist() == [True, False, False, True]
    assert checked.lat[checked.ok].tolist() == [1.5, -1.0] and checked.ms[checked.ok].tolist() == [1700000000000,
                                                                                                 1700000000123]
    assert [(b.line, b.reason.split(":")[0]) for b in checked.bad] == [(3, "lat_out_of_range"), (4, "bad_timestamp"),
                                                                        (5, "bad_type")]
    assert all(b.source == str(f) for b in checked.bad) and checked.bad[1].raw == "1,2,soon"


def test_a_tab_separated_headerless_check_in_log_is_read_with_its_columns_named(tmp_path: Path) -> None:
    # GIVEN check-ins as the SNAP Gowalla log has them: user, ISO time, lat, lon, place; tabs, no header, .txt.gz
    f = tmp_path / "checkins.txt.gz"
    with gzip.open(f, "wt") as out:
        out.write("0\t2010-10-19T23:55:27Z\t30.2359091167\t-97.7951395833\t22847\n"
                  "0\t2010-10-18T22:17:43Z\t30.2691029532\t-97.7493953705\t420315\n"
                  "1\t2010-10-17T23:42:03Z\t30.2557309927\t-97.7633857727\t316637\n")
    # WHEN counted with its columns named
    cols = EventColumns(names=("entity_id", "ts", "lat", "lon", "place"))
    r = count_events([f], cols, CountOptions(86_400, 12, ts_unit="iso"))
    # THEN three check-ins of two users, one a day, each in its tile
    assert r.events == 3 and r.entities == 2
    assert r.counts.window.tolist() == [int(datetime(2010, 10, d, tzinfo=UTC).timestamp()) // 86_400
                                        for d in (17, 18, 19)]
    rows = {window_csv(r.counts, w).splitlines()[1].split(",")[0] for w in r.counts.windows()}
    assert rows == {quadkey(tile(lon, lat, 12)) for lon, lat in ((-97.7951395833, 30.2359091167),
                                                                   (-97.7493953705, 30.2691029532),
                                                                   (-97.7633857727, 30.2557309927))}
