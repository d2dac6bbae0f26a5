"""Publishing a spec, the one way both of the partitioner's paths take: the spec object, then ``desired`` by compare
and swap.

The window path (:func:`lambdas.partitioner.logic.process_snapshot`) and the fast path
(:func:`lambdas.partitioner.surge.process_surge`) each build a spec on the ``desired`` version they read, and each
publishes it with :func:`publish`:

1. the spec object ``specs/v<n>.json`` with ``If-None-Match: *`` (never overwritten; an object left by a publish that
   lost its race is skipped by taking the next number, as long as ``desired`` is still the version built on);
2. control ``pk="desired"`` only if it still holds the version the spec was built on
   (:meth:`lambdas.runtime.dynamodb.ControlTable.put_after`).

So of two paths that read the same ``desired`` at once, one moves it and the other learns it **raced**: it builds
again on the new ``desired`` (the window path, whose next build keeps the relief sticky; the fast path, whose
relief may then find the cell already moved) or gives up. Neither can replace the other's version with a spec built
without it. The deploy controller deploys only versions ``desired`` reached, so a raced spec object is never
deployed.
"""

from __future__ import annotations

from dataclasses import dataclass

from geokernel.contracts.control import ControlKey
from geokernel.contracts.spec_pointer import DesiredPointer, spec_key
from geokernel.contracts.stream import geo_stream_name
from geokernel.partition_spec.model import Spec
from lambdas.runtime.dynamodb import ControlTable
from lambdas.runtime.errors import AdapterError
from lambdas.runtime.records import read_desired
from lambdas.runtime.s3 import SpecExists, SpecStore
from lambdas.runtime.timestamps import now_iso

MAX_VERSION_RETRIES = 3


class PublishFailed(AdapterError):
    """No free version number after the one built (spec objects exist under each): the message names them."""


@dataclass(frozen=True)
class Published:
    """What :func:`publish` did: the spec and its key when ``desired`` moved to it; else ``raced``, with the version
    ``desired`` holds now."""

    spec: Spec | None
    key: str
    raced: bool
    desired: int | None


def publish(specs: SpecStore, control: ControlTable, prefix: str, spec: Spec, built_on: int | None,
            now: float) -> Published:
    """Publish ``spec``, built on ``desired`` version ``built_on`` (None: none yet); see the module docstring.

    Raises
    ------
    PublishFailed
        When :data:`MAX_VERSION_RETRIES` version numbers after the spec's are all taken by objects.
    AdapterError
        When S3 or DynamoDB fails (the invocation is retried).
    """
    for _ in range(MAX_VERSION_RETRIES):
        try:
            key = specs.put_new(spec)
            break
        except SpecExists:
            latest = read_desired(control)
            if (latest.version if latest else None) != built_on:
                return Published(None, "", True, latest.version if latest else None)
            n = spec.version + 1  # an object of a publish that lost its race (or crashed): take the next number
            spec = spec.replace(version=n, stream_name=geo_stream_name(prefix, n))
    else:
        raise PublishFailed(f"no free spec version after {spec.version!r} (objects exist under "
                            f"{spec_key(spec.version)!r} and before)")
    if not control.put_after(ControlKey.DESIRED, DesiredPointer(spec.version, key, now_iso(now)).to_item(), built_on):
        latest = read_desired(control)
        return Published(None, key, True, latest.version if latest else None)
    return Published(spec, key, False, spec.version)
