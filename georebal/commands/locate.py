"""``python -m georebal locate --lat LAT --lon LON [--entity ID]``: where the router sends an event there, now.

Against a spec file (``--spec FILE``, offline: no AWS) or the deployment's live spec (control item ``active`` and the
spec it names, :mod:`georebal.deployment` for the names): the partition and its cell, the worker and its slot, the
geo stream, the shard and the ExplicitHashKey the router puts with (:mod:`georebal.locating`, the router's own
``RoutingTable``), and, with a deployment, the slot's lease now (owner, expiry). ``--json`` prints one JSON object.
A point outside the events' limits, or a split cell without ``--entity``: one line naming it, exit 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

from botocore.exceptions import BotoCoreError

from geokernel.contracts.control import ControlKey, control_item
from geokernel.contracts.stream import geo_stream_name
from geokernel.errors import SpecError
from geokernel.partition_spec.parse import load_spec
from geokernel.partition_spec.rules import check
from georebal.aws import Aws, Connect
from georebal.deployment import Deployment, add_deployment_arguments, resolve
from georebal.errors import DeploymentError, InputError
from georebal.exits import EXIT_OK
from georebal.locating import Location, check_point, deployed_shard, locate, read_lease
from georebal.settings import settings_of
from georebal.smoke.clock import Clock, SystemClock, took
from lambdas.router.routing import RoutingTable
from lambdas.runtime.dynamodb import ControlTable
from lambdas.runtime.errors import LambdaError
from lambdas.runtime.records import read_active
from lambdas.runtime.s3 import SpecStore

NEEDS = ("ControlTable", "SpecsBucket", "LeasesTable")


def cmd_locate(args: argparse.Namespace, connect: Connect, *, clock: Clock | None = None) -> int:
    check_point(args.lat, args.lon)
    if args.spec is not None:
        location = locate(file_table(args), args.lat, args.lon, args.entity, str(args.spec))
    else:
        location = live_location(args, connect(args.region, args.profile))
    now = (clock or SystemClock()).now()
    print(json.dumps({**dataclasses.asdict(location), "now": now}, indent=1) if args.json else text(location, now))
    return EXIT_OK


def file_table(args: argparse.Namespace) -> RoutingTable:
    """The routing table of ``--spec FILE``; its stream: the spec's ``stream_name``, else ``<prefix>-geo-v<n>``."""
    try:
        spec = check(load_spec(args.spec))
    except SpecError as exc:
        raise InputError(f"--spec: {exc}") from None
    return RoutingTable(spec, spec.stream_name or geo_stream_name(settings_of(args).prefix, spec.version))


def live_location(args: argparse.Namespace, aws: Aws) -> Location:
    """Locate in the active spec, as the router reads it; the shard of the deployed stream; the slot's lease."""
    names = resolve(args, aws, NEEDS)
    table, source = live_table(aws, names)
    location = locate(table, args.lat, args.lon, args.entity, source)
    try:
        shard = (deployed_shard(aws.client("s3"), aws.client("kinesis"), names.name("SpecsBucket"), location)
                 if location.shard is not None else None)
        lease = read_lease(aws.client("dynamodb"), names.name("LeasesTable"), location.version, location.worker)
    except BotoCoreError as exc:
        raise DeploymentError(f"cannot read the deployment in {aws.region} ({exc})") from None
    return dataclasses.replace(location, shard=shard or location.shard, lease=lease, lease_read=True)


def live_table(aws: Aws, names: Deployment) -> tuple[RoutingTable, str]:
    """The router's routing table of the active spec (:func:`lambdas.runtime.records.read_active`, the spec behind it)
    and where it came from."""
    control, bucket = names.name("ControlTable"), names.name("SpecsBucket")
    try:
        active = read_active(ControlTable(aws.client("dynamodb"), control))
        if active is None:
            raise DeploymentError(f"no spec is active: {control_item(ControlKey.ACTIVE)} is missing in the control "
                                  f"table {control!r} ({names.origin('ControlTable')}); the router routes nothing yet "
                                  f"(give --spec FILE to locate in a spec file)")
        spec = SpecStore(aws.client("s3"), bucket).get(active.spec_key)
    except (LambdaError, SpecError) as exc:
        raise DeploymentError(f"cannot read the active spec: {exc}") from None
    except BotoCoreError as exc:
        raise DeploymentError(f"cannot read the active spec in {aws.region} ({exc})") from None
    flipped = f", active since {active.flipped_at}" if active.flipped_at else ""
    return RoutingTable(spec, active.stream_name), f"s3://{bucket}/{active.spec_key}{flipped}"


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def lease_text(location: Location, now: float) -> str:
    if not location.lease_read:
        return "not read (--spec: no deployment)"
    lease = location.lease
    if lease is None:
        return f"{location.slot}: no lease item (no worker has claimed the slot)"
    left = lease.expires_at - now
    when = f"in {took(left)}" if left >= 0 else f"expired {took(-left)} ago"
    flags = ", ".join(f for f, on in (("ready", lease.ready), ("drained", lease.drained),
                                      ("released", lease.released)) if on) or "not ready"
    holder = f"held by {lease.owner!r}" if lease.owner else "held by no one"
    return f"{lease.key}: {holder}, expires {_iso(lease.expires_at)} ({when}); {flags}"


def text(location: Location, now: float) -> str:
    """The location as aligned lines."""
    entity = f", entity {location.entity!r}" if location.entity is not None else ""
    cell = f"cell {location.cell!r}" if location.cell else "the catch-all (no listed cell holds the point)"
    split = ", a share of a cell split by entity" if location.split else ""
    shard = location.shard
    shard_text = (f"{shard.shard_id} ({shard.index + 1} of {shard.count}, {shard.found_by})" if shard is not None else
                  f"one of the worker's {location.worker_shards} shards, by entity: give --entity ID")
    rows = [("point", f"lat {location.lat!r}, lon {location.lon!r}{entity}"),
            ("spec", f"v{location.version}: {location.spec_source}"),
            ("partition", f"{location.partition} ({cell}{split})"),
            ("worker", f"{location.worker} (slot {location.slot})"),
            ("geo stream", location.stream),
            ("shard", shard_text),
            ("hash key", f"ExplicitHashKey {location.hash_key}"),
            ("lease", lease_text(location, now))]
    return "\n".join(f"{k:<11}{v}" for k, v in rows)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``locate`` sub-command."""
    p = sub.add_parser(
        "locate", help="where the router sends an event at a point: partition, worker, stream, shard, lease",
        description="Locate a point (and entity) the way the router does (its RoutingTable): the partition and its "
                    "cell, the worker and its slot, the geo stream, the shard and the ExplicitHashKey; in the "
                    "deployment's live spec (control item 'active'), with the slot's lease holder now, or in a spec "
                    "file (--spec).",
        epilog="exit status: 0 located; 2 a point outside the events' limits, a split cell without --entity, no "
               "active spec, or bad input (one line naming it)")
    p.add_argument("--lat", type=float, required=True, help="latitude, degrees")
    p.add_argument("--lon", type=float, required=True, help="longitude, degrees")
    p.add_argument("--entity", metavar="ID", help="the entity id (a split hot cell, or a worker of several shards, "
                                                  "routes by it)")
    p.add_argument("--spec", type=Path, metavar="FILE", help="locate in this spec JSON file (no AWS) instead of the "
                                                             "deployment's live spec")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_deployment_arguments(p, NEEDS)
    p.set_defaults(func=cmd_locate)
