"""infra.config: defaults, parsing of CLI strings, and errors that name the key and show the bad value."""

from __future__ import annotations

import json

import pytest

from geokernel.contracts.plan import SwapMode
from geokernel.contracts.timestamps import TsUnit
from infra.aggregation import emr_arguments, glue_arguments
from infra.config import DEFAULTS, ConfigError, load_config


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
    assert policy == {"mode": "predictive", "high_watermark": 0.8, "low_watermark": 0.3, "max_waste_ratio": 1.25,
                      "cooldown_s": 60, "min_change": 0.05}


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
        ("policy_mode", "psychic"),
        ("vpc_id", "my-vpc"),
        ("worker_cpu", 300),
        ("worker_memory_mib", 9999),
        ("retain_data", "maybe"),
        ("alarm_email", "not-an-address"),
        ("lease_s", True),
        ("swap_mode", "halfway"),
        ("glue_kinesis_connector_jar", "https://example.com/connector.jar"),
        ("glue_kinesis_connector_jar", "s3://my-jars/connector.zip"),
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


@pytest.mark.parametrize(("max_load", "window_s", "shards"), [
    (10_000, 300, 1),        # the default: 33 events/s
    (150_000, 300, 1),       # 500 events/s per worker: half a shard
    (150_001, 300, 2),
    (6_000, 10, 2),          # 600 events/s
    (5_000, 10, 1),
    (250_000, 10, 50),       # 25,000 events/s: the most shards a worker may own
])
def test_a_workers_shards_are_derived_from_its_cap_with_margin(max_load: int, window_s: int, shards: int) -> None:
    # GIVEN a cap per window and no shards_per_worker THEN a worker gets ceil(rate / (1,000 records/s * 0.5)) shards
    ctx = {**DEFAULTS, "max_load": max_load, "window_s": window_s, "watermark_s": min(60, window_s)}
    cfg = load_config(ctx)
    assert (cfg.max_load, cfg.shards_per_worker) == (max_load, shards)


def test_a_cap_beyond_the_most_shards_a_worker_may_own_is_rejected_naming_max_load() -> None:
    # GIVEN 25,001 events/s per worker: 51 shards at 500 events/s each, above MAX_SHARDS_PER_WORKER (50)
    ctx = {**DEFAULTS, "max_load": 250_010, "window_s": 10, "watermark_s": 10}
    with pytest.raises(ConfigError) as err:
        load_config(ctx)
    assert str(err.value).startswith("context 'max_load'") and "250010" in str(err.value)


@pytest.mark.parametrize(("given", "ok"), [(1, False), (2, True), (7, True), (51, False), ("two", False)])
def test_an_explicit_shards_per_worker_must_fit_the_cap(given: object, ok: bool) -> None:
    # GIVEN 600 events/s per worker (needs 2 shards) and an explicit shards_per_worker
    ctx = {**DEFAULTS, "max_load": 6_000, "window_s": 10, "watermark_s": 10, "shards_per_worker": given}
    if ok:
        assert load_config(ctx).shards_per_worker == given
        return
    # THEN too few, too many or not a number is rejected naming the setting and the bad value
    with pytest.raises(ConfigError) as err:
        load_config(ctx)
    assert str(err.value).startswith("context 'shards_per_worker'") and repr(given) in str(err.value)


def test_unknown_context_keys_are_rejected_with_the_known_ones() -> None:
    import aws_cdk as cdk

    from infra.config import config_from_node

    # GIVEN the CLI's spelling of a setting next to the CDK's own keys (feature flags, settings, lookups)
    app = cdk.App(context={"max-load": "5", "@aws-cdk/core:newStyleStackSynthesis": True,
                           "aws:cdk:enable-path-metadata": True,
                           "availability-zones:account=123456789012:region=eu-west-1": ["eu-west-1a"]})
    # WHEN the config is read THEN synth stops, naming the key and listing the known ones
    with pytest.raises(ConfigError) as err:
        config_from_node(app.node)
    assert "['max-load']" in str(err.value) and "'max_load'" in str(err.value)
    # AND without it the same context is accepted
    ok = cdk.App(context={"max_load": "5", "@aws-cdk/core:newStyleStackSynthesis": True,
                          "aws:cdk:enable-path-metadata": True})
    assert config_from_node(ok.node).max_load == 5.0


def test_policy_mode_selects_the_policy_the_partitioner_runs() -> None:
    # GIVEN policy_mode reactive WHEN loaded
    text = load_config({"policy_mode": "reactive"}).policy.to_json()
    # THEN the partitioner Lambda's own parser reads the reactive policy with the watermarks of cdk.json
    from partitioner.control.controller import ControlSettings

    settings = ControlSettings.from_json(text, where="POLICY_JSON")
    assert settings.mode == "reactive" and settings.reactive.high_watermark == 0.9
    # AND the default is the predictive policy
    assert ControlSettings.from_json(load_config({}).policy.to_json(), where="POLICY_JSON").mode == "predictive"


@pytest.mark.parametrize(("key", "bad", "good"), [
    *[("leases_warm_writes", bad, 6000) for bad in (1, 4000, 40_001, -1, "lots")],
    *[("leases_warm_reads", bad, 20000) for bad in (1, 12000, 40_001, -1, "lots")]])
def test_leases_warm_throughput_is_off_or_above_a_new_tables(key: str, bad: object, good: int) -> None:
    # GIVEN a warm throughput at or below what a new on-demand table has anyway (4,000 writes, 12,000 reads), or past
    # the table quota WHEN loaded THEN one line names the key and the value
    with pytest.raises(ConfigError, match=f"'{key}'.*{bad!r}"):
        load_config({key: bad})
    # AND 0 and a value above the new table's are taken, each setting on its own
    assert getattr(load_config({}), key) == 0
    assert getattr(load_config({key: good}), key) == good


def test_a_glue_connector_jar_is_for_the_glue_engine_only() -> None:
    # GIVEN the connector jar with each engine
    jar = "s3://my-jars/kinesis/connector.jar"
    # WHEN loaded THEN Glue takes it, and EMR (whose runtime bundles the connector) names the key, the value and engine
    assert load_config({"engine": "glue", "glue_kinesis_connector_jar": jar}).glue_kinesis_connector_jar == jar
    assert load_config({"engine": "glue"}).glue_kinesis_connector_jar is None
    with pytest.raises(ConfigError, match=r"'glue_kinesis_connector_jar' is for engine=glue .*'s3://my-jars/kinesis/"
                                          r"connector.jar' with engine='emr'"):
        load_config({"engine": "emr", "glue_kinesis_connector_jar": jar})


@pytest.mark.parametrize(("workers", "writes", "reads"), [
    (0, 0, 0),            # not declared: a new table's 4,000 / 12,000
    (100, 0, 0),          # 600 / 1,400 units/s: a new table sustains them
    (666, 0, 0),          # 3,996 writes: still a new table's
    (700, 4200, 0),       # 4,200 writes pre-warmed; 9,800 reads within a new table's 12,000
    (1000, 6000, 14000),  # the figures the 1,000-worker scale run was measured OK with
    (2857, 17142, 39998),  # the most workers whose reads fit a table's 40,000
])
def test_the_leases_warm_throughput_follows_fleet_workers(workers: int, writes: int, reads: int) -> None:
    # GIVEN fleet_workers and no leases_warm_* setting WHEN loaded
    config = load_config({"fleet_workers": workers})
    # THEN the table is warmed to 6 write and 14 read units/s per worker, or not at all where a new table sustains it
    assert (config.fleet_workers, config.leases_warm_writes, config.leases_warm_reads) == (workers, writes, reads)


def test_explicit_warm_throughput_wins_over_fleet_workers() -> None:
    # GIVEN fleet_workers=1000 and an explicit leases_warm_writes (as text, like -c gives it)
    config = load_config({"fleet_workers": "1000", "leases_warm_writes": "8000"})
    # WHEN loaded THEN the explicit writes are kept and the reads still follow the fleet
    assert (config.leases_warm_writes, config.leases_warm_reads) == (8000, 14000)


def test_a_fleet_past_a_tables_warm_throughput_is_refused_naming_fleet_workers() -> None:
    # GIVEN a fleet whose reads would need 14 x 3,000 = 42,000 units/s, above a table's 40,000
    # WHEN loaded THEN one line names fleet_workers, the need, the most workers and the setting to give instead
    with pytest.raises(ConfigError, match=r"'fleet_workers' \(3000\) needs 42,000 read units/s .* above a table's "
                                          r"40,000: declare at most 2,857 workers, or set 'leases_warm_reads'"):
        load_config({"fleet_workers": 3000})
    # AND an explicit reads number within the table's maximum lets that fleet through
    assert load_config({"fleet_workers": 3000, "leases_warm_reads": 40000}).leases_warm_writes == 18000


@pytest.mark.parametrize("bad", [-1, 100_001, "many", 1.5, True])
def test_fleet_workers_is_a_worker_count(bad: object) -> None:
    # GIVEN a fleet_workers that is no worker count WHEN loaded THEN the key and the value are named
    with pytest.raises(ConfigError, match=f"'fleet_workers'.*{bad!r}"):
        load_config({"fleet_workers": bad})


def test_the_ts_unit_is_set_in_event_fields_and_reaches_the_router_workers_and_job_with_it() -> None:
    # GIVEN cdk.json's event_fields with a ts_unit, as an object and as `-c event_fields=...` text
    cfg = load_config({"event_fields": {"ts": "time", "ts_unit": "s"}})
    # THEN the deployment's mapping holds it (default auto), from either form
    assert cfg.event_fields.ts_unit is TsUnit.S and load_config({}).event_fields.ts_unit is TsUnit.AUTO
    assert load_config({"event_fields": '{"ts_unit": "us"}'}).event_fields.ts_unit is TsUnit.US
    # AND the value the stack sets as EVENT_FIELDS (router, workers) and passes the Spark job carries it
    text = cfg.event_fields.to_json()
    assert json.loads(text) == {"ts": "time", "ts_unit": "s"}
    assert emr_arguments({"event-fields": text})[:2] == ["--event-fields", text]
    assert glue_arguments({"event-fields": text})["--event_fields"] == text
    # AND a unit alone is a mapping worth passing (not the default); one that is none stops synth naming it
    assert not load_config({"event_fields": {"ts_unit": "ms"}}).event_fields.is_default
    with pytest.raises(ConfigError, match=r"^context 'event_fields': event field mapping: ts_unit 'seconds' is not one "
                                          r"of auto, s, ms, us, iso$"):
        load_config({"event_fields": {"ts_unit": "seconds"}})


@pytest.mark.parametrize(("value", "ok"), [("", True), ("default", True), ("fences", True), ("org/fences.v1", True),
                                           ("aws.partner/x", False), ("my bus", False), ("b" * 257, False),
                                           ("arn:aws:events:eu-west-1:123456789012:event-bus/fences", False)])
def test_the_geofence_event_bus_is_off_or_a_bus_name(value: str, ok: bool) -> None:
    # GIVEN a geofence_event_bus setting
    ctx = {"geofence_event_bus": value}
    if ok:
        # THEN '' is no bus, a name is kept
        assert load_config(ctx).geofence_event_bus == (value or None)
        return
    # THEN anything else is refused naming the key and the value (an ARN too: the bus is of the stack's account)
    with pytest.raises(ConfigError) as err:
        load_config(ctx)
    assert str(err.value).startswith("context 'geofence_event_bus'") and repr(value)[:40] in str(err.value)


def test_a_misspelt_geofence_event_bus_key_is_rejected_by_the_unknown_keys_check() -> None:
    from infra.config import reject_unknown
    # GIVEN the CLI's spelling of the new setting
    # THEN synth stops naming it (rather than synthesizing without the bus)
    with pytest.raises(ConfigError, match=r"\['geofence-event-bus'\]"):
        reject_unknown(["geofence-event-bus", "geofence_event_bus"])


def test_surge_context_is_the_routers_meter_or_off() -> None:
    # GIVEN the context key 'surge' as an object, as JSON text (-c), 'off', and a bad key
    # WHEN parsed
    # THEN the router's SURGE_JSON spells every setting out (or is 'off'), and a bad key is named
    from geokernel.surge.meter import SurgeSettings

    assert load_config({"surge": {"horizon_s": 120}}).surge == SurgeSettings(horizon_s=120).to_json()
    assert load_config({"surge": '{"trigger": 0.95}'}).surge == SurgeSettings(trigger=0.95).to_json()
    assert load_config({"surge": "OFF"}).surge == "off"
    with pytest.raises(ConfigError, match="context 'surge': unknown key 'nope'"):
        load_config({"surge": {"nope": 1}})
