"""local.config: the local loop's command line, ``--quick``, and a pace the fleet can follow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geokernel.contracts.event_fields import EventFields
from geokernel.contracts.timestamps import TsUnit
from local.config import QUICK, EventsOptions, RunConfig, parse_args
from local.dataset import HOTSPOT, EventFactory, Scenario, bad_events, load_places
from local.environment import handler_env
from local.run import main
from local.twin import stack_context


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


def test_the_event_fields_flag_sets_the_ts_unit_of_the_producer_and_every_reader() -> None:
    # GIVEN --event-fields with a ts_unit WHEN parsed
    cfg = parse_args(["--quick", "--event-fields", "ts=time,ts_unit=s"])
    # THEN the run's mapping carries it; the router and workers get it in EVENT_FIELDS, the stack in its context
    assert cfg.event_fields == EventFields(ts="time", ts_unit=TsUnit.S)
    assert json.loads(handler_env(cfg)["EVENT_FIELDS"]) == {"ts": "time", "ts_unit": "s"}
    assert json.loads(stack_context(cfg, False)["event_fields"]) == {"ts": "time", "ts_unit": "s"}
    # AND the built-in producer stamps its events in seconds, the bad ones too
    factory = EventFactory(load_places("world"), Scenario(4.0, 3600.0, hotspot_place=10), 3, fields=cfg.event_fields)
    assert {e["time"] for e in factory.events(5, 0.5, 1_795_255_500_000)} == {1_795_255_500}
    assert json.loads(bad_events(3, 1_795_255_500_000, cfg.event_fields)[2].raw)["time"] == 1_795_255_500
    # AND a unit that is none is one usage line naming it
    with pytest.raises(ValueError, match="--event-fields: event field mapping: ts_unit 'sec' is not one of"):
        parse_args(["--event-fields", "ts_unit=sec"])


def test_a_bad_event_fields_flag_is_one_line_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a mapping naming an unknown field WHEN the loop starts THEN it exits 2 with one line naming flag and value
    assert main(["--quick", "--event-fields", "height=h"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: --event-fields: unknown event field 'height' in {'height': 'h'} "
                   "(the fields are event_id, entity_id, ts, lat, lon; and the setting ts_unit)")


def test_events_flags_make_events_options() -> None:
    # GIVEN --events with column flags, a speed and a duration WHEN parsed
    cfg = parse_args(["--events", "day.csv", "--lat", "LAT", "--lon", "LON", "--time", "t", "--entity", "car",
                      "--event-id", "id", "--time-unit", "ms", "--speed", "60", "--duration", "90"])
    # THEN the options keep them as given (the speed and duration as the replay's limits)
    assert cfg.events == EventsOptions("day.csv", "LAT", "LON", "t", "car", "id", "ms", 60.0, 90.0)
    assert cfg.source() == "recorded log 'day.csv'" and RunConfig().source() == "dataset 'world'"
    # AND without --speed and --duration the speed is left to the log; --quick caps at its duration
    assert parse_args(["--events", "d.csv"]).events == EventsOptions("d.csv")
    # AND --columns names a headerless log's columns
    assert parse_args(["--events", "t.csv", "--columns", "entity_id,ts,lon,lat"]).events == EventsOptions(
        "t.csv", columns="entity_id,ts,lon,lat")
    assert parse_args(["--events", "d.csv", "--quick"]).events == EventsOptions("d.csv", max_duration_s=QUICK["duration_s"])
    # AND the built-in replay has none
    assert parse_args([]).events is None


@pytest.mark.parametrize(("argv", "message"), [
    (["--lat", "y"], "--lat only apply with --events FILE"),
    (["--event-id", "i", "--time-unit", "s"], "--event-id, --time-unit only apply with --events FILE"),
    (["--ts-unit", "us"], "--time-unit only apply with --events FILE"),
    (["--columns", "a,b,c"], "--columns only apply with --events FILE"),
    (["--events", "d.csv", "--rate", "50"], "--rate 50.0 does not apply with --events 'd.csv'"),
    (["--events", "d.csv", "--dataset", "europe"], "--dataset 'europe' does not apply with --events 'd.csv'"),
])
def test_flags_that_do_not_fit_events_are_refused(argv: list[str], message: str) -> None:
    # WHEN a flag is given that does not fit (with or without --events) THEN parsing raises naming it
    with pytest.raises(ValueError) as exc:
        parse_args(argv)
    assert str(exc.value).startswith(message)


def test_a_bad_time_unit_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN --time-unit is not one of the reader's units THEN argparse exits 2 naming the value
    with pytest.raises(SystemExit) as exc:
        parse_args(["--events", "d.csv", "--time-unit", "fortnights"])
    assert exc.value.code == 2 and "'fortnights'" in capsys.readouterr().err


def test_kpl_flag_turns_on_aggregated_producing() -> None:
    # GIVEN / WHEN --kpl is given or not THEN the config says so (off by default)
    assert parse_args(["--quick", "--kpl"]).kpl and not parse_args(["--quick"]).kpl and not RunConfig().kpl
