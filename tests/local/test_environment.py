"""local.environment: what the handlers and workers are told, from the local loop's command line."""

from __future__ import annotations

import json

from local.config import parse_args
from local.environment import geofence_events, handler_env, replay_clocks


def test_the_local_loop_takes_the_swap_mode_and_hands_it_to_the_control_plane() -> None:
    # GIVEN the local loop's command line WHEN parsed THEN carry by default, whole on request, and SWAP_MODE follows
    assert parse_args([]).swap_mode == "carry"
    whole = parse_args(["--quick", "--swap-mode", "whole"])
    assert whole.swap_mode == "whole" and handler_env(whole)["SWAP_MODE"] == "whole"


def test_the_local_loop_hands_shards_per_worker_to_the_partitioner() -> None:
    # GIVEN the local loop's command line WHEN parsed THEN one shard per worker by default, k on request
    assert handler_env(parse_args([]))["SHARDS_PER_WORKER"] == "1"
    assert handler_env(parse_args(["--quick", "--shards-per-worker", "2"]))["SHARDS_PER_WORKER"] == "2"


def test_event_fields_reach_the_router_and_workers_only_when_renamed() -> None:
    # GIVEN the loop with and without --event-fields WHEN its environment is built
    renamed = handler_env(parse_args(["--quick", "--event-fields", "lat=latitude,lon=longitude"]))
    # THEN EVENT_FIELDS carries the mapping's JSON, and is left out for the canonical names
    assert json.loads(renamed["EVENT_FIELDS"]) == {"lat": "latitude", "lon": "longitude"}
    assert "EVENT_FIELDS" not in handler_env(parse_args(["--quick"]))
def test_the_transform_flag_reaches_the_workers_with_the_settings_it_names(monkeypatch) -> None:
    # GIVEN the default command line, then one naming the stateful geofence transform, with its dwell time set here
    monkeypatch.setenv("GEOFENCE_DWELL_S", "20")
    monkeypatch.delenv("GEOFENCES_CSV", raising=False)
    default = handler_env(parse_args(["--quick"]))
    env = handler_env(parse_args(["--quick", "--transform", "transforms.geofence_state:GeofenceState"]))
    # THEN the workers get GEO_TRANSFORM, and the dwell time (a setting the transform names) but no unset variable
    assert default["GEO_TRANSFORM"] == "geo_service.pipeline.transform:ReverseGeocoder" and "GEOFENCE_DWELL_S" not in default
    assert env["GEO_TRANSFORM"] == "transforms.geofence_state:GeofenceState" and env["GEOFENCE_DWELL_S"] == "20"
    assert "GEOFENCES_CSV" not in env
    # AND the router numbers events for the stateful one only (its state follows each entity)
    assert env["STATE_HANDOFF"] == "1" and "STATE_HANDOFF" not in default


def test_a_recorded_replay_tells_the_transform_to_measure_time_by_the_recorded_time(monkeypatch) -> None:
    # GIVEN the stateful geofence transform (its time_setting GEOFENCE_TIME_FIELD), unset in this shell
    monkeypatch.delenv("GEOFENCE_TIME_FIELD", raising=False)
    spec = "transforms.geofence_state:GeofenceState"
    # WHEN the loop replays a recorded log with it, and the built-in places
    replay = handler_env(parse_args(["--quick", "--events", "builtin:nyharbor", "--transform", spec]))
    places = handler_env(parse_args(["--quick", "--transform", spec]))
    # THEN the replay's workers measure time by the recorded time (ts is the replay clock); the built-in replay's by ts
    assert replay["GEOFENCE_TIME_FIELD"] == "recorded_utc" and "GEOFENCE_TIME_FIELD" not in places
    assert replay_clocks(spec, 100).endswith("the transform transforms.geofence_state:GeofenceState measures time by "
                                             "recorded_utc (GEOFENCE_TIME_FIELD): its speeds and dwell times are "
                                             "recorded ones")
    # AND a value set in the shell wins, and the clocks line says plainly what is then in replay time
    monkeypatch.setenv("GEOFENCE_TIME_FIELD", "ts")
    assert handler_env(parse_args(["--quick", "--events", "builtin:nyharbor", "--transform", spec]))[
        "GEOFENCE_TIME_FIELD"] == "ts"
    assert "its speeds are 100x the recorded ones and its dwell times 1/100 of them (REPLAY TIME)" in replay_clocks(spec, 100)
    # AND a transform that declares no time setting is said to compute in replay time whatever it takes from ts
    assert "declares no time_setting: whatever it computes from ts (a speed, a dwell) is in replay time (100x" in \
        replay_clocks("geo_service.pipeline.transform:ReverseGeocoder", 100)


def test_a_bad_transform_flag_is_a_usage_error_naming_it(capsys) -> None:
    # GIVEN a --transform that names no class WHEN parsed THEN argparse exits 2 naming the value
    import pytest

    with pytest.raises(SystemExit) as exit_:
        parse_args(["--transform", "transforms.geofence:Nope"])
    assert exit_.value.code == 2 and "'transforms.geofence:Nope'" in capsys.readouterr().err


def test_a_geofence_transform_gets_the_loops_own_bus_whatever_the_shell_says(monkeypatch) -> None:
    # GIVEN a shell with a bus of its own set, and the loop with the default and with each geofence transform
    monkeypatch.setenv("GEOFENCE_EVENT_BUS", "someone-elses-bus")
    default = handler_env(parse_args(["--quick"]))
    envs = [handler_env(parse_args(["--quick", "--transform", t]))
            for t in ("transforms.geofence_state:GeofenceState", "transforms.geofence_polygons:GeofencePolygons")]
    # THEN the geofence transforms' workers put on the loop's bus (created in moto), the default's on none
    assert "GEOFENCE_EVENT_BUS" not in default
    assert [e["GEOFENCE_EVENT_BUS"] for e in envs] == ["georebal-local-geofence-events"] * 2
    assert not geofence_events("geo_service.pipeline.transform:ReverseGeocoder")


def test_the_twins_stack_grants_the_loops_bus_to_a_geofence_transforms_workers() -> None:
    # GIVEN the synth context of a run of the polygon transform, and of the default one
    from local.twin import stack_context
    polygons = stack_context(parse_args(["--quick", "--transform", "transforms.geofence_polygons:GeofencePolygons"]),
                             stateful=True)
    default = stack_context(parse_args(["--quick"]), stateful=False)
    # THEN the stack is synthesized with the loop's bus (its task role may put on it), the default's with none
    assert polygons["geofence_event_bus"] == "georebal-local-geofence-events"
    assert "geofence_event_bus" not in default
