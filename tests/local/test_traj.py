"""Tracktable .traj files as recorded-log CSV (local.traj) and the built-in log made from one."""

from __future__ import annotations

from pathlib import Path

import pytest

from local.recorded import BUILTIN_LOGS, builtin_path, read_recorded
from local.traj import HEADER, TrajError, traj_to_csv

TWO = (
    "*T*,aa,terrestrial,2,0,*P*,terrestrial,2,1,1,0,111,2020-06-30 02:07:55,-118.18,33.84,"
    "111,2020-06-30 02:09:26,-118.17,33.83\n"
    "\n"
    "*T*,bb,terrestrial,1,0,*P*,terrestrial,2,1,1,0,222,2020-06-30 01:00:00,-72.9,40.0\n"
)


def test_every_point_becomes_a_row_in_the_ais_layout(tmp_path: Path) -> None:
    # GIVEN two trajectories (and a blank line)
    src, dst = tmp_path / "a.traj", tmp_path / "out" / "a.csv"
    src.write_text(TWO)
    # WHEN converted THEN each point is one row: object id, ISO time, lon, lat
    assert traj_to_csv(src, dst) == 3
    assert dst.read_text().splitlines() == [HEADER, "111,2020-06-30T02:07:55,-118.18,33.84",
                                            "111,2020-06-30T02:09:26,-118.17,33.83", "222,2020-06-30T01:00:00,-72.9,40.0"]


@pytest.mark.parametrize(("line", "says"), [
    ("*T*,aa,terrestrial,2,0,*P*,terrestrial,2,1,1,0,111,2020-06-30 02:07:55,-118.18,33.84\n", "2 points announced"),
    ("*T*,aa,terrestrial,1,1,speed,*P*,terrestrial,2,1,1,0,111,t,1,2\n", "not a trajectory without properties"),
    ("MMSI,BaseDateTime,LON,LAT\n", "not a trajectory without properties"),
])
def test_a_line_in_another_layout_names_file_and_line_and_writes_nothing(tmp_path: Path, line: str, says: str) -> None:
    src, dst = tmp_path / "b.traj", tmp_path / "b.csv"
    src.write_text(TWO + line)
    with pytest.raises(TrajError, match=f"b.traj:4: {says}"):
        traj_to_csv(src, dst)
    assert not dst.exists()


def test_the_us_coastal_log_reads_as_1185_ships() -> None:
    # GIVEN the built-in log shipped as .traj WHEN its CSV is read with its column mapping
    spec = BUILTIN_LOGS["uscoastal"]
    log = read_recorded(builtin_path(spec), spec.columns, None, spec.time_unit)
    # THEN every point is a good row of one of the vessels, over most of the recorded day
    assert len(log) == 235_967 and not log.bad
    assert len(set(log.entity_id)) == 1_185 and 23 * 3600 < log.span_s < 24 * 3600
