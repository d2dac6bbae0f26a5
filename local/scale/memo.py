"""Memory sharing between the simulated workers and router containers (the simulation only).

A real worker task and a real router container each parse the spec and build its index once. A thousand of
them in one process would hold a thousand copies of the same immutable objects, so while the simulation runs:

* a worker's spec read still makes its own S3 ``GetObject`` (counted), but the parse is shared by version;
* the spec index (:class:`geokernel.partition_spec.index.SpecIndex`) and the router's
  :class:`lambdas.router.routing.RoutingTable` are built once per spec object.

Only object identity changes; every value is the one the worker or router would have built itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from unittest import mock

import geo_service.serving.slots
import lambdas.router.routing
from geo_service.adapters.aws import load_spec_from_s3
from geokernel.contracts.spec_pointer import spec_key
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import Spec


@contextlib.contextmanager
def shared_objects() -> Iterator[None]:
    """Patch the three constructors for the duration of the simulation."""
    specs: dict[tuple[str, int], Spec] = {}
    indexes: dict[int, tuple[Spec, SpecIndex]] = {}
    tables: dict[tuple[int, str], tuple[Spec, lambdas.router.routing.RoutingTable]] = {}
    real_table = lambdas.router.routing.RoutingTable

    def load(s3: Any, bucket: str, version: int) -> Spec:
        key = (bucket, version)
        if key in specs:
            s3.get_object(Bucket=bucket, Key=spec_key(version))["Body"].read()
            return specs[key]
        specs[key] = load_spec_from_s3(s3, bucket, version)
        return specs[key]

    def index(spec: Spec) -> SpecIndex:
        hit = indexes.get(id(spec))
        if hit is None or hit[0] is not spec:
            hit = indexes[id(spec)] = (spec, SpecIndex(spec))
        return hit[1]

    def table(spec: Spec, stream_name: str) -> lambdas.router.routing.RoutingTable:
        hit = tables.get((id(spec), stream_name))
        if hit is None or hit[0] is not spec:
            hit = tables[(id(spec), stream_name)] = (spec, real_table(spec, stream_name))
        return hit[1]

    with mock.patch.object(geo_service.serving.slots, "load_spec_from_s3", load), \
            mock.patch.object(geo_service.serving.slots, "SpecIndex", index), \
            mock.patch.object(lambdas.router.routing, "RoutingTable", table):
        yield
