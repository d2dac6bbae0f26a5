"""The event_fields setting: validated at synth, passed as EVENT_FIELDS to the router and the workers and as
--event-fields / --event_fields to the Spark job; nothing of it in the default template."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from app import build_app
from geokernel.contracts.event_fields import EventFields
from infra.aggregation import emr_arguments, glue_arguments
from infra.config import ConfigError, load_config

REPO = Path(__file__).resolve().parents[2]
MAPPING = {"event_id": "id", "entity_id": "vehicle", "ts": "time", "lat": "latitude", "lon": "longitude", "ts_unit": "s"}
MAPPED_JSON = EventFields(**MAPPING).to_json()


def _template(tmp_path: Path, **overrides: Any) -> Template:
    ctx = {**json.loads((REPO / "cdk.json").read_text())["context"], **overrides}
    return Template.from_stack(build_app(cdk.App(context=ctx, outdir=str(tmp_path))))


@pytest.mark.parametrize(("value", "needle"), [
    ({"latitude": "lat"}, "unknown event field 'latitude'"),
    ({"lat": ""}, "event field 'lat': a JSON key of 1-256 characters expected, got ''"),
    ({"lat": "lon"}, "'lon' is given to more than one field"),
    (["lat"], "must be an object"),
    ("lat=latitude", "'lat=latitude'"),
])
def test_a_bad_mapping_stops_synth_naming_the_key_and_value(value: Any, needle: str) -> None:
    # GIVEN a bad event_fields context value WHEN loaded THEN one ConfigError names the key and the bad value
    with pytest.raises(ConfigError) as err:
        load_config({"event_fields": value})
    assert str(err.value).startswith("context 'event_fields': ") and needle in str(err.value)


def test_the_mapping_is_read_from_an_object_or_its_json_text() -> None:
    # GIVEN the mapping as in cdk.json (an object) and as `-c event_fields=...` passes it (text)
    # THEN both give the same typed mapping, and the default is the canonical names
    assert load_config({"event_fields": MAPPING}).event_fields == load_config({"event_fields": MAPPED_JSON}).event_fields
    assert load_config({"event_fields": MAPPING}).event_fields.lat == "latitude"
    assert load_config({}).event_fields.is_default


def test_the_default_template_carries_no_mapping(emr: Any, glue: Any) -> None:
    # GIVEN cdk.json as shipped THEN no function, no worker container and no job is told about event fields
    for synth in (emr, glue):
        text = json.dumps(synth.template.to_json())
        assert "EVENT_FIELDS" not in text and "event-fields" not in text and "event_fields" not in text


def test_a_mapping_reaches_the_router_the_workers_and_the_emr_job(tmp_path: Path) -> None:
    # GIVEN -c event_fields={...} WHEN synthesized
    template = _template(tmp_path, event_fields=MAPPING)
    # THEN the router function and the worker container carry EVENT_FIELDS, the other functions do not
    template.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "lambdas.router.handler.handler",
        "Environment": {"Variables": Match.object_like({"EVENT_FIELDS": MAPPED_JSON})}})
    others = [f for f in template.find_resources("AWS::Lambda::Function").values()
              if f["Properties"].get("Handler", "").startswith("lambdas.")
              and f["Properties"]["Handler"] != "lambdas.router.handler.handler"]
    assert len(others) == 5  # partitioner, deployer, hooks, the streaming job run's resource, the geo-stream teardown
    assert all("EVENT_FIELDS" not in f["Properties"].get("Environment", {}).get("Variables", {}) for f in others)
    template.has_resource_properties("AWS::ECS::TaskDefinition", {"ContainerDefinitions": [
        Match.object_like({"Environment": Match.array_with([{"Name": "EVENT_FIELDS", "Value": MAPPED_JSON}])})]})
    # AND the EMR job run passes it as --event-fields
    (run,) = template.find_resources("Custom::EmrServerlessStreamingJobRun").values()
    create = "".join(p if isinstance(p, str) else "TOKEN" for p in run["Properties"]["StartJobRun"]["Fn::Join"][1])
    args = json.loads(create)["jobDriver"]["sparkSubmit"]["entryPointArguments"]
    assert args[args.index("--event-fields") + 1] == MAPPED_JSON


def test_a_mapping_reaches_the_glue_job(tmp_path: Path) -> None:
    # GIVEN engine=glue and an event field mapping WHEN synthesized
    template = _template(tmp_path, engine="glue", event_fields=MAPPING)
    # THEN the Glue job's default arguments carry it as --event_fields
    template.has_resource_properties("AWS::Glue::Job", {
        "DefaultArguments": Match.object_like({"--event_fields": MAPPED_JSON})})


def test_job_arguments_name_the_mapping_only_when_set() -> None:
    # GIVEN job settings without and with the mapping
    base = {k: k.upper() for k in ("stream-name", "stream-arn", "region", "snapshots", "checkpoint", "quarantine",
                                   "costs", "zoom", "grid-zoom", "refine-events", "window", "watermark")}
    mapped = {**base, "event-fields": MAPPED_JSON}
    # THEN only the mapped settings pass the flag, to both entry points
    assert "--event-fields" not in emr_arguments(base) and "--event_fields" not in glue_arguments(base)
    assert emr_arguments(mapped)[-4:-2] == ["--event-fields", MAPPED_JSON]
    assert glue_arguments(mapped)["--event_fields"] == MAPPED_JSON
