"""Lambda config from env vars (lambdas.runtime.config)."""

from __future__ import annotations

import re

import pytest

from geokernel.contracts.env import ENV_VARS, Component, EnvVar
from lambdas.runtime.config import ConfigError, LambdaConfig


def test_defaults_and_values() -> None:
    # GIVEN a few env vars / WHEN read / THEN values are typed and defaults filled
    cfg = LambdaConfig.from_env({"CONTROL_TABLE": "c", "MAX_LOAD": "2500", "ROUTER_SPEC_TTL_S": "2.5"})
    assert (cfg.control_table, cfg.max_load, cfg.router_spec_ttl_s, cfg.prefix) == ("c", 2500.0, 2.5, "georebal")
    assert cfg.stream_name(7) == "georebal-geo-v7" and cfg.green_timeout_s == 900.0
    # AND the router reads the active pointer on every invocation unless told to cache it
    assert LambdaConfig.from_env({}).router_spec_ttl_s == 0.0
    assert LambdaConfig.from_env({"ROUTER_SPEC_TTL_S": "0"}).router_spec_ttl_s == 0.0


@pytest.mark.parametrize(("name", "value"), [("MAX_LOAD", "lots"), ("MAX_LOAD", "-1"), ("GRID_ZOOM", "12.5"),
                                             ("ROUTER_SPEC_TTL_S", "nan"),
                                             ("ROUTER_SPEC_TTL_S", "-1")])
def test_bad_values_are_named(name: str, value: str) -> None:
    # GIVEN a malformed value / WHEN read / THEN the error names the variable and the value
    with pytest.raises(ConfigError, match=re.escape(name) + ".*" + re.escape(repr(value))):
        LambdaConfig.from_env({name: value})


def test_event_fields_are_read_from_their_variable() -> None:
    # GIVEN EVENT_FIELDS set, unset, and malformed
    cfg = LambdaConfig.from_env({"EVENT_FIELDS": '{"lat": "latitude", "lon": "longitude"}'})
    # THEN the mapping is read (unset: the canonical names), and a bad value is named with its variable
    assert (cfg.event_fields.lat, cfg.event_fields.lon, cfg.event_fields.ts) == ("latitude", "longitude", "ts")
    assert LambdaConfig.from_env({}).event_fields.is_default
    with pytest.raises(ConfigError, match=r"environment variable EVENT_FIELDS: unknown event field 'height'"):
        LambdaConfig.from_env({"EVENT_FIELDS": '{"height": "h"}'})
    with pytest.raises(ConfigError, match=r"EVENT_FIELDS.*'lat=latitude'"):
        LambdaConfig.from_env({"EVENT_FIELDS": "lat=latitude"})


def test_require_lists_missing_names() -> None:
    # GIVEN no buckets / WHEN required / THEN every missing name is listed
    with pytest.raises(ConfigError, match="SPECS_BUCKET, QUARANTINE_BUCKET"):
        LambdaConfig.from_env({"CONTROL_TABLE": "c"}).require("CONTROL_TABLE", "SPECS_BUCKET", "QUARANTINE_BUCKET")


class _Recording(dict[str, str]):
    """An environment that records every name asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        self.asked.add(key)
        return super().get(key, default)


def test_every_variable_read_is_a_contract_name() -> None:
    # GIVEN an environment that records what is read
    env = _Recording()
    # WHEN the config is read
    LambdaConfig.from_env(env)
    # THEN every name is one of geokernel/contracts/env.py, and the Lambdas' own settings are all read
    assert env.asked <= set(EnvVar)
    lambdas = {Component.PARTITIONER, Component.ROUTER, Component.DEPLOYER, Component.HOOKS}
    from_own_environment = {v for v, use in ENV_VARS.items() if lambdas & set(use.read_by)} - {
        EnvVar.SPEC_VERSION, EnvVar.CODE_REVISION}  # the deployer reads these from a task definition, not its env
    assert from_own_environment <= env.asked
