"""The geo_transform setting: validated at synth, passed to the workers as GEO_TRANSFORM, image copies transforms/."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from app import build_app
from infra.config import ConfigError, load_config
from infra.dockerfile import copy_sources

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("bad", ["justamodule", "mod:", ":Cls", "my-mod:Cls", "a.b:C.D", 3])
def test_a_bad_transform_name_stops_synth_naming_it(bad: Any) -> None:
    with pytest.raises(ConfigError, match=r"context 'geo_transform' must be '' \(the default reverse geocoder\)"):
        load_config({"geo_transform": bad})


def test_the_default_sets_no_geo_transform(emr: Any) -> None:
    # GIVEN cdk.json as shipped THEN the worker container has no GEO_TRANSFORM (the worker's default applies)
    assert load_config({}).geo_transform is None
    (task,) = emr.resources("AWS::ECS::TaskDefinition").values()
    env = task["Properties"]["ContainerDefinitions"][0]["Environment"]
    assert "GEO_TRANSFORM" not in {e["Name"] for e in env}


def test_a_set_transform_reaches_the_worker_container(tmp_path: Path) -> None:
    # GIVEN -c geo_transform=transforms.geofence:Geofences
    ctx = {**json.loads((REPO / "cdk.json").read_text())["context"], "geo_transform": "transforms.geofence:Geofences"}
    stack = build_app(cdk.App(context=ctx, outdir=str(tmp_path)))
    # THEN the worker task carries it as GEO_TRANSFORM
    Template.from_stack(stack).has_resource_properties("AWS::ECS::TaskDefinition", {"ContainerDefinitions": [
        Match.object_like({"Environment": Match.array_with([{"Name": "GEO_TRANSFORM",
                                                              "Value": "transforms.geofence:Geofences"}])})]})


def test_a_build_from_the_repo_root_keeps_every_copy_source_too() -> None:
    # GIVEN the Dockerfile and the ignore file BuildKit reads beside it for `docker build -f geo_service/Dockerfile .`
    # (CDK does not read it: its staged context is checked in test_worker_image.py)
    dockerfile = (REPO / "geo_service" / "Dockerfile").read_text()
    ignore = (REPO / "geo_service" / "Dockerfile.dockerignore").read_text().split()
    # WHEN the Dockerfile's COPY sources are read THEN transforms/ is one, and the ignore file re-includes each
    sources = copy_sources(dockerfile)
    assert "transforms/" in sources
    for source in sources:
        top = source.split("/")[0]
        assert f"!{top}/" in ignore and f"!{top}/**" in ignore, source


def test_a_transform_package_is_installed_only_when_given_and_with_the_locks_versions() -> None:
    # GIVEN the worker Dockerfile's transform-package step (infra/worker_transform.py: build arg TRANSFORM_PACKAGE)
    text = (REPO / "geo_service" / "Dockerfile").read_text()
    assert 'ARG TRANSFORM_PACKAGE=""' in text
    step = text[text.index("RUN if [ -n \"$TRANSFORM_PACKAGE\" ]"):text.index("    fi\n")]
    # THEN it installs the package with a constraints file (-c) that the step derives from the image lock
    assert 'pip install --no-compile -c /tmp/locked.txt "$TRANSFORM_PACKAGE"' in step
    sed = step.split("sed -n ", 1)[1].split(" /app/geo_service/requirements.txt", 1)[0]
    lock = REPO / "geo_service" / "requirements.txt"
    done = subprocess.run(["sed", "-n", shlex.split(sed)[0], str(lock)], capture_output=True, text=True, check=True)
    # AND the constraints are exactly the lock's pins, name==version, one per locked package
    pins = done.stdout.split()
    locked = [line.split(" ")[0] for line in lock.read_text().splitlines() if line[:1].isalnum() and "==" in line]
    assert pins == locked and pins and all(p.count("==") == 1 and "\\" not in p for p in pins)
