"""local.recorded: a recorded log read, checked, sorted and scheduled; bad rows to the quarantine; built-in logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from geokernel.contracts.events import MAX_PARTITION_KEY
from geokernel.contracts.quarantine import QuarantineRecord
from geokernel.errors import EventLogError
from local.recorded import (
    BUILTIN_LOGS,
    KEEPS_UP_RATE,
    MAX_ENTITY_ID,
    QUARANTINE_WRITER,
    WARMUP_SUFFIX,
    RecordedLogError,
    builtin_log,
    builtin_path,
    describe,
    log_events,
    plan_replay,
    quarantine_bad_rows,
    read_recorded,
    suggested_speed,
)
from local.replay import RecordedTimeline
from local.texts import Texts
from partitioner.load.eventcols import EventColumns

T0 = 1_700_000_000  # epoch seconds


def write(tmp_path: Path, text: str, name: str = "log.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


class FakeS3:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}

    def put_object(self, Bucket: str, Key: str, Body: bytes) -> dict[str, Any]:
        self.objects[(Bucket, Key)] = Body
        return {}


def test_rows_are_sorted_by_recorded_time_stable_with_file_line_ids(tmp_path: Path) -> None:
    # GIVEN a CSV whose rows are out of time order, two of them at the same time, no event id column
    path = write(tmp_path, "lat,lon,ts,entity_id\n"
                           f"1.0,2.0,{T0 + 20},car-b\n"
                           f"1.5,2.5,{T0},car-a\n"
                           f"3.0,4.0,{T0 + 20},car-c\n"
                           f"5.0,6.0,{T0 + 5},car-a\n")
    # WHEN it is read
    log = read_recorded(path, EventColumns())
    # THEN the rows come in recorded-time order, equal times in file order, ids naming file and line
    assert tuple(log.event_id) == ("log.csv:3", "log.csv:5", "log.csv:2", "log.csv:4")
    assert tuple(log.entity_id) == ("car-a", "car-a", "car-b", "car-c")
    assert log.ms.tolist() == [T0 * 1000, (T0 + 5) * 1000, (T0 + 20) * 1000, (T0 + 20) * 1000]
    assert log.lat.tolist() == [1.5, 5.0, 1.0, 3.0] and log.span_s == 20.0 and not log.bad


def test_mapped_columns_event_id_column_and_no_entity_column(tmp_path: Path) -> None:
    # GIVEN a JSON-lines log with its own names, ISO times, an event id column and no entity column
    path = write(tmp_path, "".join(json.dumps(d) + "\n" for d in (
        {"y": 48.1, "x": 11.5, "when": "2024-05-01T08:30:05Z", "eid": "b"},
        {"y": 48.2, "x": 11.6, "when": "2024-05-01T08:30:00Z", "eid": "a"})), "log.jsonl")
    # WHEN it is read with the column mapping and --event-id
    log = read_recorded(path, EventColumns(lat="y", lon="x", time="when"), "eid", "iso")
    # THEN the ids are the column's, and each event is its own entity
    assert tuple(log.event_id) == ("a", "b") and tuple(log.entity_id) == ("a", "b")
    assert log.span_s == 5.0


def test_bad_rows_are_named_by_file_and_line_and_not_sent(tmp_path: Path) -> None:
    # GIVEN a log with a bad latitude, a bad time, a missing entity, an extra field and two good rows
    path = write(tmp_path, "lat,lon,ts,entity_id\n"
                           f"1.0,2.0,{T0},a\n"
                           f"north,2.0,{T0},a\n"
                           f"1.0,2.0,yesterday,a\n"
                           f"1.0,2.0,{T0},\n"
                           f"1.0,2.0,{T0},a,extra\n"
                           f"1.0,2.0,{T0 + 1},b\n")
    # WHEN it is read
    log = read_recorded(path, EventColumns())
    # THEN only the good rows are in the log, and every bad one names file, line and value
    assert tuple(log.event_id) == ("log.csv:2", "log.csv:7")
    assert [(b.line, b.reason.split(":")[0]) for b in log.bad] == [
        (3, "bad_type"), (4, "bad_timestamp"), (5, "missing_field"), (6, "bad_type")]
    assert "'north'" in log.bad[0].reason and "entity entity_id is missing" in log.bad[2].reason
    assert all(b.source == str(path) for b in log.bad) and log.bad[1].raw == "1.0,2.0,yesterday,a"
    assert log.bad_by_reason() == {"bad_type": 2, "bad_timestamp": 1, "missing_field": 1}


def test_an_entity_id_leaves_room_for_the_warm_up_suffix_in_a_partition_key(tmp_path: Path) -> None:
    # GIVEN entity ids of the longest length the replay takes and one character more
    longest, over = "e" * MAX_ENTITY_ID, "f" * (MAX_ENTITY_ID + 1)
    path = write(tmp_path, f"lat,lon,ts,entity_id\n1,2,{T0},{longest}\n1,2,{T0},{over}\n")
    # WHEN the log is read
    log = read_recorded(path, EventColumns())
    # THEN the longer is a bad row naming the limit and why; the other's warm-up copies still fit a partition key
    assert tuple(log.entity_id) == (longest,) and [b.line for b in log.bad] == [3]
    assert f"is longer than {MAX_ENTITY_ID} characters (a {MAX_PARTITION_KEY}-character partition key less room for " \
           "#warmup<k>)" in log.bad[0].reason
    (copy,) = log_events(log, 0, 1, np.array([0], dtype=np.int64), f"{WARMUP_SUFFIX}999999")
    assert len(str(copy["entity_id"])) == MAX_PARTITION_KEY


def test_an_empty_event_id_is_a_bad_row(tmp_path: Path) -> None:
    # GIVEN a log whose event id column is empty on one row
    path = write(tmp_path, f"lat,lon,ts,id\n1,2,{T0},x\n1,2,{T0},\n")
    # WHEN it is read with --event-id id THEN that row is bad (missing_field), the other kept
    log = read_recorded(path, EventColumns(), "id")
    assert tuple(log.event_id) == ("x",) and [b.line for b in log.bad] == [3]
    assert log.bad[0].reason.startswith("missing_field: event id id")


def test_unreadable_file_missing_column_and_no_valid_event_raise(tmp_path: Path) -> None:
    # GIVEN a missing file, a file without the mapped time column, and a file with only bad rows
    no_ts = write(tmp_path, "lat,lon,time\n1,2,3\n")
    all_bad = write(tmp_path, "lat,lon,ts\n99,2,3\n", "bad.csv")
    # WHEN they are read THEN each raises one error naming the file (and the column)
    with pytest.raises(EventLogError, match="does not exist"):
        read_recorded(tmp_path / "nope.csv", EventColumns())
    with pytest.raises(EventLogError, match=r"no column 'ts' \(--time\)"):
        read_recorded(no_ts, EventColumns())
    with pytest.raises(EventLogError, match="no column 'eid'"):
        read_recorded(write(tmp_path, "lat,lon,ts\n1,2,3\n", "x.csv"), EventColumns(), "eid")
    with pytest.raises(RecordedLogError, match=r"no valid event in .*bad.csv.*\(1 bad rows\)"):
        read_recorded(all_bad, EventColumns())


def test_plan_without_speed_fits_the_whole_log_in_the_duration(tmp_path: Path) -> None:
    # GIVEN a log spanning 600 recorded seconds
    path = write(tmp_path, "lat,lon,ts\n" + "".join(f"1,2,{T0 + s}\n" for s in (0, 1, 2, 100, 300, 600)))
    log = read_recorded(path, EventColumns())
    # WHEN the replay is planned without --speed for 60 s with 5 s windows
    plan = plan_replay(log, None, None, 60.0, 5.0)
    # THEN it runs 10x, every event is sent, due at its recorded offset / speed
    assert plan.speed == 10.0 and plan.duration_s == 60.0 and plan.send == 6 and not plan.capped
    assert plan.offsets_s.tolist() == [0.0, 0.1, 0.2, 10.0, 30.0, 60.0]
    # AND the first window (5 wall s = 50 recorded s) holds the first three events; the mean rate is 6/60
    assert plan.first_window == 3 and plan.rate == pytest.approx(0.1)


def test_plan_with_speed_follows_the_log_capped_by_duration(tmp_path: Path) -> None:
    # GIVEN the same 600 s log
    path = write(tmp_path, "lat,lon,ts\n" + "".join(f"1,2,{T0 + s}\n" for s in (0, 1, 2, 100, 300, 600)))
    log = read_recorded(path, EventColumns())
    # WHEN it is planned at 20x without and with a 15 s cap
    free = plan_replay(log, 20.0, None, 180.0, 10.0)
    capped = plan_replay(log, 20.0, 15.0, 180.0, 10.0)
    # THEN without a cap it lasts span/speed and sends everything
    assert free.duration_s == 30.0 and free.send == 6 and not free.capped
    # AND the cap cuts the replay at 15 s: the events recorded after 300 s are not sent
    assert capped.duration_s == 15.0 and capped.capped and capped.send == 5
    assert "5 of 6 good rows (--duration cut the rest)" in describe(log, capped)


def test_a_plan_faster_than_the_loop_keeps_up_with_says_so_and_which_speed_fits(tmp_path: Path) -> None:
    # GIVEN a log of 2,000 events over 100 recorded seconds
    path = write(tmp_path, "lat,lon,ts\n" + "".join(f"1,2,{T0 + i // 20}\n" for i in range(2000)))
    log = read_recorded(path, EventColumns())
    # WHEN planned in 2 s (1,000 events/s) and in 10 s (200 events/s)
    fast, slow = plan_replay(log, None, 2.0, 180.0, 1.0), plan_replay(log, None, 10.0, 180.0, 1.0)
    # THEN only the fast plan warns, naming the speed that replays it at the rate the loop keeps up with
    assert fast.rate > KEEPS_UP_RATE >= slow.rate
    assert f"--speed {suggested_speed(fast):g} replays this log" in describe(log, fast)
    assert "WARNING" not in describe(log, slow)
    # AND at the suggested speed (rounded down: at most the rate, within 1 %) it does not warn again
    again = plan_replay(log, suggested_speed(fast), None, 180.0, 1.0)
    assert again.rate <= 1.01 * KEEPS_UP_RATE and "WARNING" not in describe(log, again)


def test_a_log_without_entities_is_noted_when_it_starts(tmp_path: Path) -> None:
    # GIVEN the same positions with and without an entity column
    rows = [(1, 2, T0), (1.1, 2, T0 + 1), (1.2, 2, T0 + 2)]
    bare = read_recorded(write(tmp_path, "lat,lon,ts\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows)),
                         EventColumns())
    named = read_recorded(write(tmp_path, "lat,lon,ts,entity_id\n" + "".join(f"{a},{b},{c},car\n" for a, b, c in rows),
                                "named.csv"), EventColumns())
    # WHEN each is described THEN only the log whose every event is its own entity gets the note
    assert "NOTE: every event is its own entity" in describe(bare, plan_replay(bare, None, None, 60.0, 5.0))
    assert "NOTE" not in describe(named, plan_replay(named, None, None, 60.0, 5.0))


def test_a_log_of_one_instant_plays_in_one_window(tmp_path: Path) -> None:
    # GIVEN a log whose events all share one time WHEN planned at a given speed
    log = read_recorded(write(tmp_path, f"lat,lon,ts\n1,2,{T0}\n3,4,{T0}\n"), EventColumns())
    plan = plan_replay(log, 5.0, None, 180.0, 10.0)
    # THEN everything is due at once and the replay lasts one window
    assert plan.duration_s == 10.0 and plan.offsets_s.tolist() == [0.0, 0.0] and plan.send == 2


def test_events_carry_recorded_values_and_the_replay_clock(tmp_path: Path) -> None:
    # GIVEN a read log
    log = read_recorded(write(tmp_path, f"lat,lon,ts,entity_id\n40.5,-74.25,{T0}.5,7\n"), EventColumns())
    # WHEN its events are made with a replay-clock stamp, without and with a warm-up copy's suffix
    (event,) = log_events(log, 0, 1, np.array([123], dtype=np.int64))
    (copy,) = log_events(log, 0, 1, np.array([123], dtype=np.int64), "#warmup2")
    # THEN they hold the canonical fields: the recorded coordinates and entity, ts the replay clock, the recorded time
    assert event == {"event_id": "log.csv:2", "entity_id": "7", "ts": 123, "lat": 40.5, "lon": -74.25,
                     "recorded_utc": "2023-11-14T22:13:20.500Z"}
    # AND a copy is an entity of its own: its event id and entity id both carry the suffix
    assert copy == {**event, "event_id": "log.csv:2#warmup2", "entity_id": "7#warmup2"}


def test_bad_rows_go_to_the_quarantine_as_contract_records(tmp_path: Path) -> None:
    # GIVEN a log with one bad row
    log = read_recorded(write(tmp_path, f"lat,lon,ts\n1,2,{T0}\n1,200,{T0}\n"), EventColumns())
    s3 = FakeS3()
    # WHEN its bad rows are quarantined
    key = quarantine_bad_rows(s3, "q", log, 1_700_000_000_000)
    # THEN one object under the replay's writer holds a contract record naming file and line
    assert key is not None and key.startswith(f"quarantine/{QUARANTINE_WRITER}/2023-11-14/1700000000000-")
    (line,) = s3.objects[("q", key)].decode().splitlines()
    record = QuarantineRecord.from_dict(json.loads(line), key)
    assert record.code == "lon_out_of_range" and record.source == f"{tmp_path / 'log.csv'}:3"
    assert record.raw == f"1,200,{T0}" and record.quarantined_at == "2023-11-14T22:13:20.000Z"
    # AND a log without bad rows writes nothing
    good = read_recorded(write(tmp_path, f"lat,lon,ts\n1,2,{T0}\n", "good.csv"), EventColumns())
    assert quarantine_bad_rows(s3, "q", good, 1) is None and len(s3.objects) == 1


def test_timeline_shows_the_recorded_clock() -> None:
    # GIVEN a replay of 60 s at 30x starting at a recorded instant
    tl = RecordedTimeline(T0 * 1000, 30.0, 60.0)
    # THEN half-way through it has reached 15 recorded minutes, in its one phase
    assert (tl.sim_time(0.5).timestamp() - T0) == 900.0 and tl.phase(0.5) == "recorded log"


def test_builtin_log_ships_real_ais_positions() -> None:
    # GIVEN the built-in NY harbor log (tracktable-data, requirements-dev.txt)
    spec = builtin_log("builtin:nyharbor")
    assert spec is BUILTIN_LOGS["nyharbor"] and builtin_log("some/file.csv") is None
    # WHEN it is read with its columns
    log = read_recorded(builtin_path(spec), spec.columns, None, spec.time_unit)
    # THEN it holds an hour of positions of a few hundred vessels (MMSI), every row good
    assert len(log) == 8689 and not log.bad and log.span_s == 3599.0
    assert len(set(log.entity_id)) == 295
    assert float(log.lat.min()) > 40.0 and float(log.lat.max()) < 41.5


def test_unknown_builtin_names_the_choices() -> None:
    # WHEN an unknown built-in is asked for THEN the error names it and the choices
    with pytest.raises(RecordedLogError, match=r"'builtin:nope'.*builtin:nyharbor"):
        builtin_log("builtin:nope")


def test_a_parquet_log_names_its_rows(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    # GIVEN a Parquet log with integer entities and epoch-millisecond times, one latitude missing
    path = tmp_path / "day.parquet"
    pq.write_table(pa.table({"lat": [1.0, None, 3.0], "lon": [2.0, 2.0, 4.0], "ts": [T0 * 1000 + 9, T0 * 1000, T0 * 1000],
                             "entity_id": [7, 8, 9]}), path)
    # WHEN it is read
    log = read_recorded(path, EventColumns())
    # THEN the rows are named by row number, the entities are text, the bad row is named by its row
    assert tuple(log.event_id) == ("day.parquet:row3", "day.parquet:row1") and tuple(log.entity_id) == ("9", "7")
    assert [(b.line, b.reason.split(":")[0]) for b in log.bad] == [(2, "missing_field")] and log.unit == "row"


def test_id_columns_are_held_as_codes_and_read_as_texts() -> None:
    # GIVEN a coded column of three distinct entities over five rows, and line ids with a prefix
    entities = Texts(np.array([2, 0, 2, 1, 0], dtype=np.int64), ("a", "b", "c"))
    lines = Texts(np.array([7, 3, 9], dtype=np.int64), prefix="log.csv:")
    # WHEN read by index, slice and row selection
    # THEN they give the texts, and count the distinct ones without a string per row
    assert list(entities) == ["c", "a", "c", "b", "a"] and entities[3] == "b" and entities.distinct() == 3
    assert list(entities[1:3]) == ["a", "c"] and list(entities.take(np.array([4, 0]))) == ["a", "c"]
    assert list(lines) == ["log.csv:7", "log.csv:3", "log.csv:9"] and lines.distinct() == 3
    assert entities.codes.dtype == np.int64 and len(entities.values or ()) == 3
