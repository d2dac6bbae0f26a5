"""What only the live moto server has, read into the run's state before teardown.

The workers write their last cost reports as they stop, so :func:`local.run.execute` calls :func:`collect_live`
after the fleet stopped and before moto goes away; the report reads :attr:`local.state.RunState.live` afterwards.
It also keeps the enriched output and the snapshots in the run's output folder (``<out>/s3/``,
:func:`local.report.product.keep`): they live only in moto.
"""

from __future__ import annotations

import json
from collections import Counter

from geokernel.contracts.outcome import OutcomeStatus
from geokernel.contracts.snapshot import SnapshotManifest
from local.outcomes import outcome
from local.output import read_quarantine
from local.report.product import KEPT, keep
from local.report.worker_load import CostSample, cost_sample
from local.state import RunState


def collect_live(state: RunState) -> None:
    """Read manifests, snapshot rows, quarantine records, cost reports and the geofence events received from moto."""
    aws = state.aws
    assert aws is not None
    s3 = aws.client("s3")
    snaps = []
    invocations = state.notifier.invocations if state.notifier else []
    for inv in invocations:
        if outcome(inv.result)[0] == OutcomeStatus.REJECTED:
            continue  # fed no spec (e.g. --faults snapshot-corrupt: maybe not even JSON); the timeline names it
        # the partitioner read it with this decoder and did not reject it, so it decodes here too
        manifest = SnapshotManifest.from_json(
            s3.get_object(Bucket=aws.names.snapshots_bucket, Key=inv.key)["Body"].read(), inv.key)
        texts = []
        for i, f in enumerate(manifest.files):
            text = s3.get_object(Bucket=aws.names.snapshots_bucket, Key=f.key)["Body"].read().decode()
            texts.append(text if i == 0 else text.split("\n", 1)[1] if "\n" in text else "")
        snaps.append({"key": inv.key, "invoked_at": inv.at, "manifest": manifest.to_dict(), "rows_text": "".join(texts),
                      "desired_after": state.desired_after.get(inv.key), "error": inv.error,
                      "result": inv.result})
    state.live["snapshots"] = snaps
    state.live["quarantine"] = read_quarantine(s3, aws.names.quarantine_bucket)
    per_version: Counter[str] = Counter()
    costs: list[CostSample] = []
    problems: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=aws.names.costs_bucket, Prefix="costs/"):
        for obj in page.get("Contents", []):
            per_version[obj["Key"].split("/")[1]] += 1
            where = f"s3://{aws.names.costs_bucket}/{obj['Key']}"
            try:
                costs.append(cost_sample(json.loads(s3.get_object(Bucket=aws.names.costs_bucket, Key=obj["Key"])
                                                    ["Body"].read()), where))
            except ValueError as exc:
                problems.append(str(exc))
    state.live["cost_reports"] = dict(per_version)
    state.live["costs"] = costs
    state.live["cost_problems"] = problems
    buckets = {"output": aws.names.output_bucket, "snapshots": aws.names.snapshots_bucket}
    state.live["kept"] = [keep(s3, buckets[role], role, state.config.out) for role in KEPT]
    if state.geofence is not None:  # what the rule on the geofence bus sent to its log group
        state.live["geofence_events"] = state.geofence.drain()
