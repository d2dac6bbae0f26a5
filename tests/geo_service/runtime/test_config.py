"""WorkerConfig from environment variables: defaults, parsing, errors naming the variable and value."""

from __future__ import annotations

import re

import pytest

from geo_service.runtime import config as c
from geo_service.runtime.config import ConfigError, WorkerConfig
from geokernel.contracts.env import ENV_VARS, Component, EnvVar

BASE = {EnvVar.SPEC_VERSION: "7", EnvVar.CONTROL_TABLE: "ctl", EnvVar.LEASES_TABLE: "leases", EnvVar.SPECS_BUCKET: "specs",
        EnvVar.COSTS_BUCKET: "costs", EnvVar.OUTPUT_BUCKET: "out"}


def test_defaults_follow_the_contract() -> None:
    # GIVEN only the required variables
    # WHEN the config is read
    cfg = WorkerConfig.from_env(BASE)
    # THEN the documented defaults apply
    assert (cfg.spec_version, cfg.worker_id, cfg.prefix, cfg.endpoint_url) == (7, None, "georebal", None)
    assert (cfg.lease_s, cfg.heartbeat_s, cfg.drain_quiet_s, cfg.cost_report_interval_s) == (30.0, 10.0, 10.0, 300.0)
    assert (cfg.health_port, cfg.grid_zoom, cfg.buffer_ring) == (0, 12, 1)
    assert cfg.transform == "geo_service.pipeline.transform:ReverseGeocoder" and cfg.quarantine_bucket == "out"
    assert (cfg.swap_mode, cfg.barrier_timeout_s, cfg.agent_uri) == (c.SwapMode.CARRY, 900.0, None)


def test_event_fields_are_read_from_their_variable() -> None:
    # GIVEN EVENT_FIELDS naming a producer's keys, none, and a malformed one
    cfg = WorkerConfig.from_env({**BASE, EnvVar.EVENT_FIELDS: '{"entity_id": "vehicle", "ts": "time"}'})
    # THEN the mapping is read (unset: the canonical names), and a bad value is named with its variable
    assert (cfg.event_fields.entity_id, cfg.event_fields.ts, cfg.event_fields.lat) == ("vehicle", "time", "lat")
    assert WorkerConfig.from_env(BASE).event_fields.is_default
    with pytest.raises(ConfigError, match=r"environment variable EVENT_FIELDS: .*'lat'.*is given to more than one"):
        WorkerConfig.from_env({**BASE, EnvVar.EVENT_FIELDS: '{"lon": "lat"}'})


def test_the_geofence_event_bus_is_a_name_or_an_arn_and_unset_or_empty_is_none() -> None:
    # GIVEN GEOFENCE_EVENT_BUS unset, empty, a name, an ARN and a bad value
    read = {v: WorkerConfig.from_env({**BASE, EnvVar.GEOFENCE_EVENT_BUS: v}).geofence_event_bus
            for v in ("", " ", "fences", "arn:aws:events:eu-west-1:123456789012:event-bus/fences")}
    # THEN a name or ARN is kept, no value is no sink, and a bad value is named with its variable
    assert WorkerConfig.from_env(BASE).geofence_event_bus is None
    assert read == {"": None, " ": None, "fences": "fences",
                    "arn:aws:events:eu-west-1:123456789012:event-bus/fences":
                        "arn:aws:events:eu-west-1:123456789012:event-bus/fences"}
    with pytest.raises(ConfigError, match=r"GEOFENCE_EVENT_BUS must be an event bus name .*got 'my bus'"):
        WorkerConfig.from_env({**BASE, EnvVar.GEOFENCE_EVENT_BUS: "my bus"})


def test_carry_mode_needs_no_spec_version_and_whole_mode_does() -> None:
    # GIVEN the required variables without SPEC_VERSION
    env = {k: v for k, v in BASE.items() if k != EnvVar.SPEC_VERSION}
    # WHEN read in the default (carry) mode / THEN the worker is generic: no version pinned
    assert WorkerConfig.from_env(env).spec_version is None
    # WHEN read in whole mode / THEN the version is required
    with pytest.raises(ConfigError, match="SPEC_VERSION is required"):
        WorkerConfig.from_env({**env, EnvVar.SWAP_MODE: "whole"})


def test_swap_mode_values_match_the_control_plane() -> None:
    # GIVEN the worker's and the Lambdas' swap modes (the image does not ship lambdas/, so each has its own enum)
    from lambdas.runtime.config import SwapMode as LambdaSwapMode

    # THEN they have the same values
    assert [m.value for m in c.SwapMode] == [m.value for m in LambdaSwapMode]


def test_every_variable_is_read() -> None:
    # GIVEN every optional variable set
    env = {**BASE, EnvVar.WORKER_ID: "w0003", EnvVar.GEO_PREFIX: "dev", EnvVar.AWS_ENDPOINT_URL: "http://127.0.0.1:5000",
           EnvVar.LEASE_S: "6", EnvVar.DRAIN_QUIET_S: "1.5", EnvVar.COST_REPORT_INTERVAL_S: "2", EnvVar.HEALTH_PORT: "8080",
           EnvVar.GEO_TRANSFORM: "mymod:Mine", EnvVar.GRID_ZOOM: "10", EnvVar.POLL_INTERVAL_S: "0.2", EnvVar.ACTIVE_POLL_S: "0.5",
           EnvVar.BUFFER_RING: "2", EnvVar.QUARANTINE_BUCKET: "q", EnvVar.SWAP_MODE: "whole", EnvVar.DRAIN_TIMEOUT_S: "60",
           EnvVar.ECS_AGENT_URI: "http://169.254.170.2/api/x"}
    # WHEN the config is read
    cfg = WorkerConfig.from_env(env)
    # THEN each lands in its field
    assert (cfg.worker_id, cfg.prefix, cfg.endpoint_url, cfg.lease_s, cfg.drain_quiet_s) == (
        "w0003", "dev", "http://127.0.0.1:5000", 6.0, 1.5)
    assert (cfg.cost_report_interval_s, cfg.health_port, cfg.transform, cfg.grid_zoom) == (2.0, 8080, "mymod:Mine", 10)
    assert (cfg.poll_interval_s, cfg.active_poll_s, cfg.buffer_ring, cfg.quarantine_bucket) == (0.2, 0.5, 2, "q")
    assert (cfg.swap_mode, cfg.barrier_timeout_s, cfg.agent_uri) == (c.SwapMode.WHOLE, 60.0, "http://169.254.170.2/api/x")


@pytest.mark.parametrize(("changes", "message"), [
    ({EnvVar.SPEC_VERSION: None, EnvVar.SWAP_MODE: "whole"}, "SPEC_VERSION is required"),
    ({EnvVar.SWAP_MODE: "halfway"}, "SWAP_MODE must be one of ['carry', 'whole'], got 'halfway'"),
    ({EnvVar.DRAIN_TIMEOUT_S: "0"}, "barrier_timeout_s must be a positive number of seconds, got 0.0"),
    ({EnvVar.SPEC_VERSION: "seven"}, "SPEC_VERSION='seven' is not a valid int"),
    ({EnvVar.SPEC_VERSION: "0"}, "SPEC_VERSION must be an integer >= 1, got 0"),
    ({EnvVar.LEASES_TABLE: None}, "LEASES_TABLE is required"),
    ({EnvVar.WORKER_ID: "w#1"}, "WORKER_ID must be a spec worker id like 'w0001' (letters, digits, '_.-'), got 'w#1'"),
    ({EnvVar.LEASE_S: "-3"}, "lease_s must be a positive number of seconds, got -3.0"),
    ({EnvVar.LEASE_S: "nan"}, "lease_s must be a positive number of seconds, got nan"),
    ({EnvVar.HEALTH_PORT: "70000"}, "HEALTH_PORT must be in"),
    ({EnvVar.GEO_TRANSFORM: "justamodule"}, "GEO_TRANSFORM must be 'module:Class', got 'justamodule'"),
    ({EnvVar.COST_REPORT_INTERVAL_S: "soon"}, "COST_REPORT_INTERVAL_S='soon' is not a valid float"),
])
def test_bad_values_name_the_variable_and_value(changes: dict[str, str | None], message: str) -> None:
    # GIVEN an environment with one bad or missing value
    env = {k: v for k, v in {**BASE, **changes}.items() if v is not None}
    # WHEN / THEN reading it fails naming the variable and the value
    with pytest.raises(ConfigError, match=re.escape(message)):
        WorkerConfig.from_env(env)



class _Recording(dict[str, str]):
    """An environment that records every name asked for."""

    def __init__(self, values: dict[str, str]) -> None:
        super().__init__(values)
        self.asked: set[str] = set()

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        self.asked.add(key)
        return super().get(key, default)


def test_the_worker_reads_exactly_the_variables_the_contract_says_it_reads() -> None:
    # GIVEN an environment that records what is read (the required variables set)
    env = _Recording(BASE)
    # WHEN the config is read
    WorkerConfig.from_env(env)
    # THEN the names read are exactly those geokernel/contracts/env.py lists as read by the worker
    assert env.asked == {v for v, use in ENV_VARS.items() if Component.WORKER in use.read_by}
