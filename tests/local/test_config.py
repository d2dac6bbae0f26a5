"""local.config: the local loop's command line, ``--quick``, and a pace the fleet can follow."""

from __future__ import annotations

from pathlib import Path

import pytest

from local.config import QUICK, RunConfig, parse_args
from local.dataset import HOTSPOT
from local.run import main


def test_default_pace_is_one_a_fleet_can_follow() -> None:
    # GIVEN the default and the quick run settings
    for cfg in (RunConfig(), parse_args(["--quick"])):
        # THEN the hotspot ramps over at least four snapshot windows (real load ramps over minutes, even a viral event's)
        assert (HOTSPOT[1] - HOTSPOT[0]) * cfg.duration_s >= 4 * cfg.window_s, cfg
        # AND a window moves the day/night line by at most 40 simulated minutes
        assert cfg.speed * cfg.window_s <= 40 * 60, cfg
        assert "the hotspot ramps over" in cfg.pace()


def test_quick_defaults_and_explicit_flags_win() -> None:
    # GIVEN --quick with an explicit --duration WHEN parsed THEN quick settings apply except the explicit one
    cfg = parse_args(["--quick", "--duration", "30", "--out", "x"])
    assert cfg.quick and cfg.duration_s == 30.0 and cfg.window_s == QUICK["window_s"] and cfg.out == Path("x")
    # AND the default cap is a third of one window's events
    assert RunConfig(rate=100, window_s=15).cap == 500.0


def test_bad_flag_values_exit_with_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(["--speed", "0"])
    assert exc.value.code == 2


def test_event_fields_flag_renames_the_loops_schema() -> None:
    # GIVEN --event-fields WHEN parsed THEN the run config carries the mapping (default: the canonical names)
    cfg = parse_args(["--quick", "--event-fields", "lat=latitude,lon=longitude,ts=time,event_id=id,entity_id=vehicle"])
    assert cfg.event_fields.names == ("id", "vehicle", "time", "latitude", "longitude")
    assert parse_args([]).event_fields.is_default


def test_a_bad_event_fields_flag_is_one_line_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a mapping naming an unknown field WHEN the loop starts THEN it exits 2 with one line naming flag and value
    assert main(["--quick", "--event-fields", "height=h"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: --event-fields: unknown event field 'height' in {'height': 'h'} "
                   "(the fields are event_id, entity_id, ts, lat, lon)")
