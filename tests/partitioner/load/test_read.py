"""Tests for partitioner.load.read: counts CSV and snapshot rows read, vectorised and row by row, errors named."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geokernel.errors import CountsError
from partitioner.load import read as read_module
from partitioner.load.counts import Counts
from partitioner.load.read import parse_counts_csv, read_counts_csv, read_snapshot_rows


def test_reads_a_counts_csv(tmp_path: Path) -> None:
    # GIVEN a well-formed file
    f = tmp_path / "c.csv"
    f.write_text("quadkey,weight\n0231,5\n0232,2.5\n")
    # WHEN read
    counts = read_counts_csv(f)
    # THEN quadkeys and weights come through, and the total counts each place once
    assert counts.quadkeys == ("0231", "0232")
    assert counts.weights.tolist() == [5.0, 2.5]
    assert counts.total == 7.5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is empty"),
        ("qk,w\n0,1\n", "header must be 'quadkey,weight'"),
        ("quadkey,weight\n", "no data rows"),
        ("quadkey,weight\n012,1\n01x,2\n", "line 3: quadkey '01x' has characters other than 0-3"),
        ("quadkey,weight\n012,-1\n", "line 2: weight -1.0 is negative"),
        ("quadkey,weight\n012,nan\n", "line 2: weight nan is not finite"),
        ("quadkey,weight\n012,abc\n", "line 2: weight 'abc' is not a number"),
        ("quadkey,weight\n012,1\n012,2\n", "line 3: quadkey '012' already given on line 2"),
        ("quadkey,weight\n012,1,3\n", "expected 2 fields"),
    ],
)
def test_bad_counts_name_the_value_and_line(text: str, message: str) -> None:
    # GIVEN/WHEN a malformed file THEN the error names the bad value and where it is
    with pytest.raises(CountsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_counts_csv(text, "c.csv")


def test_mixed_zooms_are_refused_where_not_allowed() -> None:
    with pytest.raises(CountsError, match=r"c.csv line 3: quadkey '0123' is zoom 4 but line 2 is zoom 3"):
        parse_counts_csv("quadkey,weight\n012,1\n0123,1\n", "c.csv", allow_mixed_zoom=False)


def test_unreadable_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(CountsError, match=r"nope\.csv"):
        read_counts_csv(tmp_path / "nope.csv")


def test_a_gzipped_counts_file_reads_as_its_content_and_a_cut_one_is_named(tmp_path: Path) -> None:
    # GIVEN a counts file, the same gzipped, and a gzip file cut short
    text = "quadkey,weight\n0231,5\n0232,2.5\n"
    plain, packed, cut = tmp_path / "c.csv", tmp_path / "c.csv.gz", tmp_path / "cut.csv.gz"
    plain.write_text(text)
    packed.write_bytes(gzip.compress(text.encode()))
    cut.write_bytes(gzip.compress(text.encode())[:12])
    # WHEN read THEN the gzipped one has the same quadkeys and weights
    a, b = read_counts_csv(plain), read_counts_csv(packed)
    assert a.quadkeys == b.quadkeys and a.weights.tolist() == b.weights.tolist()
    # AND the cut one is an error naming the file
    with pytest.raises(CountsError, match=r"cannot read counts file '.*cut\.csv\.gz'"):
        read_counts_csv(cut)


def test_an_event_log_given_as_counts_is_told_to_be_counted_first() -> None:
    # GIVEN an event log's header where a counts file is expected WHEN parsed
    # THEN the error names the header and the counts command
    with pytest.raises(CountsError, match=r"got 'entity_id,ts,Latitude,lon'; this looks like an event log .*"
                                          r"python -m partitioner counts FILE"):
        parse_counts_csv("entity_id,ts,Latitude,lon\n1,2,3,4\n", "e.csv")
    # AND a header that is not an event log's gets no such hint
    with pytest.raises(CountsError, match=r"got 'key,count'$"):
        parse_counts_csv("key,count\n0231,5\n", "e.csv")


def test_snapshot_rows_prefer_cost_and_fall_back_to_events() -> None:
    # GIVEN snapshot rows, one with a measured cost
    text = "quadkey,events,cost\n0231,100,250.5\n0232,40,\n"
    # WHEN read with and without cost
    with_cost = read_snapshot_rows(text, "snap")
    events_only = read_snapshot_rows(text, "snap", use_cost=False)
    # THEN cost is the weight where present, events elsewhere
    assert with_cost.weights.tolist() == [250.5, 40.0]
    assert events_only.weights.tolist() == [100.0, 40.0]


def test_empty_snapshot_is_an_error() -> None:
    with pytest.raises(CountsError, match="snap: snapshot has no rows"):
        read_snapshot_rows("quadkey,events,cost\n", "snap")


# the vectorised reader against the row-by-row one (same rows, same errors)
_FIELDS = st.sampled_from(["0231", "0", "3", "0232", "01x", "", " 0231 ", "0123012301230123012301230123012",
                           "02310", "12", "5", "1.5", "-1", "nan", "inf", "1e3", " 7 ", "abc", "0x1", "1_0", "-0",
                           "  ", "1e400"])


def _outcome(parse: Callable[[], Counts]) -> tuple[str, object]:
    try:
        c = parse()
    except CountsError as exc:
        return "error", str(exc)
    return "ok", (c.quadkeys, c.weights.tolist())


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.lists(_FIELDS, min_size=0, max_size=4), max_size=6), crlf=st.booleans(),
       final_newline=st.booleans(), single_zoom=st.booleans())
def test_vectorised_counts_reader_matches_the_row_by_row_reader(rows: list[list[str]], crlf: bool,
                                                                final_newline: bool, single_zoom: bool) -> None:
    # GIVEN any plain CSV text with good and bad rows (blank rows, wrong field counts, bad values, duplicates)
    eol = "\r\n" if crlf else "\n"
    text = eol.join(["quadkey,weight", *(",".join(r) for r in rows)]) + (eol if final_newline else "")
    # WHEN read by the vectorised reader and by the csv module row by row
    fast = _outcome(lambda: parse_counts_csv(text, "c.csv", allow_mixed_zoom=not single_zoom))
    slow = _outcome(lambda: read_module._parse_with_csv_module(text, "c.csv", not single_zoom))
    # THEN both give the same counts or the same one-line error
    assert fast == slow


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.lists(_FIELDS, min_size=0, max_size=4), max_size=6), use_cost=st.booleans(),
       header=st.sampled_from(["quadkey,events,cost", "quadkey,events", "quadkey, events ,cost"]))
def test_vectorised_snapshot_reader_matches_the_row_by_row_reader(rows: list[list[str]], use_cost: bool,
                                                                  header: str) -> None:
    # GIVEN snapshot rows, good and bad
    text = "\n".join([header, *(",".join(r) for r in rows)]) + "\n"
    # WHEN read both ways THEN the same counts or the same error
    fast = _outcome(lambda: read_snapshot_rows(text.encode(), "snap", use_cost=use_cost))
    slow = _outcome(lambda: read_module._snapshot_with_csv_module(text, "snap", use_cost))
    assert fast == slow


def test_first_bad_row_is_named_even_far_down_a_big_file() -> None:
    # GIVEN 200k good rows and a bad weight near the end (beyond the first cast chunk)
    rows = [f"{i:018b}".replace("1", "3") + ",1" for i in range(200_000)]
    rows[199_990] = rows[199_990].split(",")[0] + ",12abc"
    text = "quadkey,weight\n" + "\n".join(rows) + "\n"
    # WHEN read THEN the error names that line and value
    with pytest.raises(CountsError, match=r"c.csv line 199992: weight '12abc' is not a number"):
        parse_counts_csv(text, "c.csv")


def test_quoted_and_non_ascii_files_are_read_by_the_csv_module(tmp_path: Path) -> None:
    # GIVEN a file with quoted fields and a BOM
    f = tmp_path / "q.csv"
    f.write_bytes(b'\xef\xbb\xbfquadkey,weight\n"0231",5\n')
    # WHEN read THEN it is read as before
    assert read_counts_csv(f).quadkeys == ("0231",)
    # AND a file that is not UTF-8 is named
    f.write_bytes(b"quadkey,weight\n0231,\xff\n")
    with pytest.raises(CountsError, match=r"cannot read counts file .*q\.csv"):
        read_counts_csv(f)


def test_reading_counts_does_not_import_scipy() -> None:
    # GIVEN a fresh interpreter that cannot import scipy (the Spark job's environment has none)
    code = ("import sys; sys.modules['scipy'] = None\n"
            "from partitioner.load.read import read_snapshot_rows, parse_counts_csv\n"
            "c = read_snapshot_rows('quadkey,events\\n0231,4\\n02310,2\\n', 's.csv')\n"
            "print(c.total, len(c.leaves().x))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])})
    # THEN counts are read, their grid and leaves made, without scipy
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["4.0", "2"]
