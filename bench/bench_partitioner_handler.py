"""Partitioner handler time and peak memory on a 1M-quadkey snapshot (target: within a 3 GB Lambda and 60 s).

A moto server (``local.aws.SerialMotoServer`` on 127.0.0.1, free port) holds the buckets and tables. The
parent writes a snapshot of ``--quadkeys`` grid cells with the aggregation job's real writer; a
child process plays the Lambda: it runs :func:`lambdas.partitioner.logic.process_snapshot` against
the server and reports its wall time and peak RSS (``ru_maxrss`` of the child only). The in-run
baseline is the same child doing only the I/O floor (read + verify the manifest and files, parse
the rows); the report prints the handler's ratio to that baseline and to the targets.

Run: ``.venv/bin/python bench/bench_partitioner_handler.py [--quadkeys 1000000]``.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import os
import resource
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import boto3
import numpy as np

TARGET_S = 60.0
TARGET_MB = 3 * 1024.0
ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
       "AWS_REGION": "us-east-1", "GEO_PREFIX": "bench", "CONTROL_TABLE": "bench-control",
       "SNAPSHOTS_BUCKET": "bench-snapshots", "SPECS_BUCKET": "bench-specs", "COSTS_BUCKET": "bench-costs"}


def setup(endpoint: str, n: int, max_load: float) -> str:
    """Create buckets/tables and write an ``n``-cell snapshot; return the manifest key."""
    from glue_jobs.snapshot import S3Storage, SnapshotMeta, SnapshotRow, write_snapshot
    from partitioner.tiles import arrays_to_quadkeys

    s3 = boto3.client("s3", endpoint_url=endpoint)
    ddb = boto3.client("dynamodb", endpoint_url=endpoint)
    for b in ("bench-snapshots", "bench-specs", "bench-costs"):
        s3.create_bucket(Bucket=b)
    ddb.create_table(TableName="bench-control", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
    rng = np.random.default_rng(3)
    side = int(np.ceil(np.sqrt(n)))
    idx = np.arange(n)
    x, y = 1000 + idx % side, 500 + idx // side
    qks = arrays_to_quadkeys(x, y, 12)
    events = np.maximum(1, rng.lognormal(2.0, 1.2, size=n)).astype(np.int64)
    rows = sorted(SnapshotRow(q, int(e), None) for q, e in zip(qks, events, strict=True))
    end = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    meta = SnapshotMeta(end - timedelta(minutes=5), end, 12, 18, 500, 1)
    res = write_snapshot(S3Storage("bench-snapshots", "", s3), rows, meta, rows_per_file=250_000)
    print(f"snapshot: {n:,} quadkeys, {int(events.sum()):,} events, max_load {max_load:,.0f} "
          f"(lower bound {int(np.ceil(events.sum() / max_load)):,} workers)")
    return str(res.manifest_key)


def child(endpoint: str, key: str, max_load: float, mode: str, out: mp.Queue) -> None:  # type: ignore[type-arg]
    os.environ.update(ENV, AWS_ENDPOINT_URL=endpoint, MAX_LOAD=str(max_load))
    from lambdas.common.aws import make_clients
    from lambdas.common.config import LambdaConfig
    from lambdas.partitioner.logic import PartitionerDeps, process_snapshot
    from lambdas.partitioner.snapshot import parse_manifest, read_rows, verify_manifest
    from partitioner.counts import read_snapshot_rows

    cfg = LambdaConfig.from_env()
    deps = PartitionerDeps.from_config(cfg, make_clients(cfg))
    t0 = time.perf_counter()
    if mode == "io":
        manifest = parse_manifest(deps.snapshots.read(key) or b"", key)
        verify_manifest(manifest)
        read_snapshot_rows(read_rows(deps.snapshots, manifest), key)
        status = "read+verify+parse"
    else:
        outcome = process_snapshot(deps, key)
        status = f"{outcome.status} v{outcome.version} ({outcome.workers} workers) {outcome.reason[:100]}"
    elapsed = time.perf_counter() - t0
    out.put((elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, status))


def run_child(endpoint: str, key: str, max_load: float, mode: str) -> tuple[float, float, str]:
    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    p = ctx.Process(target=child, args=(endpoint, key, max_load, mode, q))
    p.start()
    result = q.get(timeout=1800)
    p.join()
    return result  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quadkeys", type=int, default=1_000_000)
    ap.add_argument("--max-load", type=float, default=200_000.0)
    args = ap.parse_args()
    os.environ.update(ENV)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    from local.aws import SerialMotoServer

    server = SerialMotoServer().start()
    endpoint = server.url
    try:
        key = setup(endpoint, args.quadkeys, args.max_load)
        io_s, io_mb, io_status = run_child(endpoint, key, args.max_load, "io")
        h_s, h_mb, h_status = run_child(endpoint, key, args.max_load, "handler")
    finally:
        server.stop()
    print(f"baseline (I/O floor: {io_status}): {io_s:7.1f} s, peak RSS {io_mb:7.0f} MB")
    print(f"partitioner handler ({h_status}): {h_s:7.1f} s, peak RSS {h_mb:7.0f} MB")
    print(f"ratio to baseline: time {h_s / io_s:.2f}x, memory {h_mb / io_mb:.2f}x")
    print(f"ratio to targets:  time {h_s / TARGET_S:.2f} of {TARGET_S:.0f} s, memory {h_mb / TARGET_MB:.2f} of "
          f"{TARGET_MB:.0f} MB")
    return 0 if h_s <= TARGET_S and h_mb <= TARGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
