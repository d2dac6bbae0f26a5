"""local.config: the local loop's command line, ``--quick``, and a pace the fleet can follow."""

from __future__ import annotations

from pathlib import Path

import pytest

from local.config import QUICK, RunConfig, parse_args
from local.dataset import HOTSPOT


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


def test_kpl_flag_turns_on_aggregated_producing() -> None:
    # GIVEN / WHEN --kpl is given or not THEN the config says so (off by default)
    assert parse_args(["--quick", "--kpl"]).kpl and not parse_args(["--quick"]).kpl and not RunConfig().kpl
