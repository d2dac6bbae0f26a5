"""infra.config: defaults, parsing of CLI strings, and errors that name the key and show the bad value."""

from __future__ import annotations

import json

import pytest

from infra.config import DEFAULTS, ConfigError, load_config
from partitioner.contracts import SwapMode


def test_cdk_json_repeats_every_default(cdk_context: dict) -> None:
    # GIVEN the context of cdk.json
    ctx = cdk_context
    # WHEN compared with the typed defaults
    # THEN every setting is there with the same value
    assert {k: ctx[k] for k in DEFAULTS} == DEFAULTS


def test_defaults_parse_into_a_frozen_config() -> None:
    # GIVEN no context at all WHEN loaded
    config = load_config({})
    # THEN the documented defaults hold and the config cannot be changed
    assert (config.prefix, config.engine, config.grid_zoom, config.zoom) == ("georebal", "emr", 12, 18)
    assert config.vpc_id is None and config.geo_stream_prefix == "georebal-geo-v"
    with pytest.raises(AttributeError):
        config.prefix = "other"  # type: ignore[misc]


def test_command_line_strings_are_parsed() -> None:
    # GIVEN values as `cdk -c key=value` passes them (strings)
    ctx = {"max_load": "5000", "retain_data": "false", "engine": "glue", "worker_cpu": "1024", "worker_memory_mib": "2048"}
    # WHEN loaded
    config = load_config(ctx)
    # THEN they have their types
    assert config.max_load == 5000.0 and config.retain_data is False and config.engine == "glue"
    assert (config.worker_cpu, config.worker_memory_mib) == (1024, 2048)


def test_policy_json_carries_every_watermark() -> None:
    # GIVEN custom watermarks WHEN loaded
    policy = json.loads(load_config({"high_watermark": 0.8, "low_watermark": 0.3, "cooldown_s": 60}).policy.to_json())
    # THEN POLICY_JSON has the RebalancePolicy fields
    assert policy == {"high_watermark": 0.8, "low_watermark": 0.3, "max_waste_ratio": 1.25, "cooldown_s": 60, "min_change": 0.05}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("prefix", "Bad_Prefix"),
        ("engine", "spark"),
        ("max_load", "-1"),
        ("max_load", "lots"),
        ("grid_zoom", "12.5"),
        ("zoom", 5),
        ("window_s", 0),
        ("watermark_s", 100000),
        ("low_watermark", 0.95),
        ("high_watermark", 1.5),
        ("vpc_id", "my-vpc"),
        ("worker_cpu", 300),
        ("worker_memory_mib", 9999),
        ("retain_data", "maybe"),
        ("alarm_email", "not-an-address"),
        ("lease_s", True),
        ("swap_mode", "halfway"),
    ],
)
def test_bad_setting_names_the_key_and_the_value(key: str, value: object) -> None:
    # GIVEN one bad setting
    # WHEN loaded
    with pytest.raises(ConfigError) as err:
        load_config({key: value})
    # THEN the message names the context key and shows the bad value with repr
    assert f"'{key}'" in str(err.value)
    assert repr(value) in str(err.value)


def test_swap_mode_defaults_to_carry_and_takes_the_control_planes_values() -> None:
    # GIVEN no setting / each mode on the command line WHEN loaded THEN carry by default, and each value is accepted


    assert load_config({}).swap_mode == "carry"
    assert [load_config({"swap_mode": m.value}).swap_mode for m in SwapMode] == ["carry", "whole"]
