"""Helpers for the partitioner Lambda tests: the snapshot cells, its dependencies over moto, manifest edits."""

from __future__ import annotations

import json
from typing import Any

from lambdas.partitioner.logic import PartitionerDeps
from tests.lambdas.conftest import Aws

CELLS = {(0, 0): 400, (1, 0): 300, (8, 8): 700, (9, 8): 200, (20, 3): 50}


def deps(aws: Aws, **kw: Any) -> PartitionerDeps:
    d = PartitionerDeps.from_config(aws.cfg, aws.clients)
    return PartitionerDeps(**{**d.__dict__, **kw})


def rewrite_manifest(aws: Aws, key: str, **changes: Any) -> None:
    body = json.loads(aws.clients.s3.get_object(Bucket=aws.cfg.snapshots_bucket, Key=key)["Body"].read())
    body.update(changes)
    aws.clients.s3.put_object(Bucket=aws.cfg.snapshots_bucket, Key=key, Body=json.dumps(body).encode())
