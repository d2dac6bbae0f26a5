"""local.environment: what the handlers and workers are told, from the local loop's command line."""

from __future__ import annotations

import json

from local.config import parse_args
from local.environment import handler_env


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
