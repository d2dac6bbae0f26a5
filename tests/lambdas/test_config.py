"""Lambda config from env vars (lambdas.common.config)."""

from __future__ import annotations

import re

import pytest

from lambdas.common.config import ConfigError, LambdaConfig


def test_defaults_and_values() -> None:
    # GIVEN a few env vars / WHEN read / THEN values are typed and defaults filled
    cfg = LambdaConfig.from_env({"CONTROL_TABLE": "c", "MAX_LOAD": "2500", "ROUTER_SPEC_TTL_S": "2.5"})
    assert (cfg.control_table, cfg.max_load, cfg.router_spec_ttl_s, cfg.prefix) == ("c", 2500.0, 2.5, "georebal")
    assert cfg.stream_name(7) == "georebal-geo-v7" and cfg.green_timeout_s == 900.0


@pytest.mark.parametrize(("name", "value"), [("MAX_LOAD", "lots"), ("MAX_LOAD", "-1"), ("GRID_ZOOM", "12.5"),
                                             ("ROUTER_SPEC_TTL_S", "nan")])
def test_bad_values_are_named(name: str, value: str) -> None:
    # GIVEN a malformed value / WHEN read / THEN the error names the variable and the value
    with pytest.raises(ConfigError, match=re.escape(name) + ".*" + re.escape(repr(value))):
        LambdaConfig.from_env({name: value})


def test_require_lists_missing_names() -> None:
    # GIVEN no buckets / WHEN required / THEN every missing name is listed
    with pytest.raises(ConfigError, match="SPECS_BUCKET, QUARANTINE_BUCKET"):
        LambdaConfig.from_env({"CONTROL_TABLE": "c"}).require("CONTROL_TABLE", "SPECS_BUCKET", "QUARANTINE_BUCKET")
