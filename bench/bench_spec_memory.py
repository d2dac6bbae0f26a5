"""Can the router, the deployer, the lifecycle hooks and the geo worker hold the largest spec the partitioner publishes?

A moto server (``local.aws.SerialMotoServer``) holds the buckets and tables. The parent writes window 1 of
``--quadkeys`` grid cells with ``bench_partitioner_handler.write_window`` (the aggregation job's writer: a dense
block at zoom 12, lognormal events), then windows 2 and 3: the same cells, read back with the job's reader, every
cell's events x ``(1 + --growth)`` per window x U(0.9, 1.1), written with its writer. The partitioner Lambda's
``process_snapshot`` runs on each in a cold child, so v1, v2, v3 are what the partitioner publishes at that size
(the load must grow: the policy keeps a spec whose workers stay below the fill, and judges them against the live
spec's ``max_load``). ``MAX_LOAD`` is window 3's total over ``--workers`` x the policy's ``target_fill``: the live
spec v2 comes out near ``--workers`` and the next, v3, larger (the forecast adds headroom while the load grows).

Each component then runs in a fresh interpreter (a cold Lambda, a new task) twice: its **floor** (the real module
imported and its runtime built: clients and adapters, no spec) and its **spec path** (the real code on the specs in
moto; the live spec is ``v2``, the next ``v3``):

* **router**: ``handler.runtime()``; ``ActiveSpecCache.current()`` on ``v2``, the active pointer flipped to ``v3``,
  ``current()`` again (the new ``RoutingTable`` is built while the old one is still held) and one batch located;
* **deployer**: ``runtime.controller()``; ``plan(v3, v2)`` with no stored plan (both specs read and the carry swap
  planned, as ``start_fleet`` does) and ``green_ready(v3)``;
* **hooks**: ``hooks.answer`` on a ``POST_SCALE_UP`` call while ``v3`` waits for green (reads ``v3`` and its
  leases), then ``plan(v3, v2)`` (what ``retire``/``rollback`` do without a stored plan);
* **worker**: ``geo_service.worker`` imported; ``SpecCache.get`` of v1..v3 (``SPEC_CACHE``), a ``SpecIndex`` and the
  region of one slot in each of the last two (a carry-over: the serving slot and the new one); the transform's
  places are not counted;
* **partitioner**: ``handler.deps()``; its spec path is the largest of the three ``process_snapshot`` runs.

Each child reports its init and work wall time and its peak RSS (``VmHWM``, see :func:`peak_rss_mb`). The table
gives the peak against the configured memory (constants imported from ``infra``) and the headroom ratio
(configured / peak); PASS when the peak is at most 75 % of it and a Lambda's CPU s, scaled to its share of a vCPU, fit
half its timeout; exit 1 on any FAIL. "Largest spec" is a linear extrapolation from the floor and the increment above
it, in spec JSON bytes and snapshot quadkeys of this shape: an estimate, not a measurement.

Run: ``.venv/bin/python bench/bench_spec_memory.py [--quadkeys 4000000] [--workers 1000] [--growth 0.15]`` (4M:
several minutes and a few GB of RAM; ``--quadkeys 200000`` for a quick run).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

HEADROOM = 0.75  # PASS: peak <= 75 % of the configured memory
# Lambda gives a function CPU in proportion to its memory, one vCPU at 1,769 MB
# (https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html): a spec path's CPU seconds here take
# about CPU s x 1769 / memory MB on the function (below 1,769 MB). PASS also needs that within half the timeout.
VCPU_MB = 1769
TIME_SHARE = 0.5
MARK = "SPEC_MEMORY_RESULT "
WINDOWS = 3
COMPONENTS = ("router", "deployer", "hooks", "worker", "partitioner")
EXTRA_ENV = {"LEASES_TABLE": "bench-leases", "QUARANTINE_BUCKET": "bench-quarantine", "ECS_CLUSTER": "bench",
             "ECS_SERVICE": "bench-workers", "ROUTER_SPEC_TTL_S": "0.001",
             "MAX_LOAD": "1000"}  # MAX_LOAD: the partitioner's floor child only (run_child sets its own)
Stamp = Callable[[], None]


def _points(spec: Any, n: int) -> tuple[Any, Any, list[str]]:
    """``n`` points at the centres of listed cells of ``spec`` (one per partition) and entity ids."""
    import numpy as np

    from geokernel.geo.tiles import bounds, quadkey_to_tile

    qks = [p.quadkeys[0] for p in spec.partitions if p.quadkeys and p.quadkeys[0]][:n]
    boxes = [bounds(quadkey_to_tile(q)) for q in qks]
    lon = np.array([(b.west + b.east) / 2 for b in boxes])
    lat = np.array([(b.south + b.north) / 2 for b in boxes])
    return lon, lat, [f"e{i}" for i in range(len(qks))]


def router(a: argparse.Namespace, stamp: Stamp) -> str:
    """The router Lambda: the active table of ``old``, a flip to ``new`` (both tables held), one batch located."""
    from geokernel.contracts.control import ControlKey
    from geokernel.contracts.spec_pointer import ActivePointer, spec_key
    from lambdas.router import handler

    rt = handler.runtime()
    stamp()
    if a.floor:
        return "handler imported, runtime built"
    before = rt.cache.current()
    pointer = ActivePointer(a.new, spec_key(a.new), f"bench-geo-v{a.new}", "2026-11-26T00:00:00Z")
    rt.cache._control.put_forward(ControlKey.ACTIVE, pointer.to_item())  # the router's own client
    time.sleep(0.01)  # past ROUTER_SPEC_TTL_S
    after = rt.cache.current()
    if before is None or after is None or after.version != a.new:
        raise SystemExit(f"router: expected tables v{a.old} then v{a.new}")
    lon, lat, ids = _points(after.spec, 500)
    keys = after.hash_keys_for(lon, lat, ids)
    return f"table v{before.version} then v{after.version} ({len(after.spec.partitions):,} partitions), {len(keys)} located"


def deployer(a: argparse.Namespace, stamp: Stamp) -> str:
    """The deployer Lambda: plan the swap ``old -> new`` from both specs, then test green's leases."""
    from lambdas.deploy import deployer as _deployer  # noqa: F401  the Lambda's module
    from lambdas.deploy.runtime import controller

    ctl = controller()
    stamp()
    if a.floor:
        return "deployer imported, controller built"
    t0 = time.perf_counter()
    plan = ctl.plan(a.new, a.old)
    return f"{plan.summary()} in {time.perf_counter() - t0:.1f} s; green ready {ctl.green_ready(a.new)}"


def hooks(a: argparse.Namespace, stamp: Stamp) -> str:
    """The lifecycle hooks Lambda: a green hold on ``new``, then the swap planned from both specs."""
    from lambdas.deploy import hooks as _hooks
    from lambdas.deploy.runtime import controller

    ctl = controller()
    stamp()
    if a.floor:
        return "hooks imported, controller built"
    out, _ = _hooks.answer({"executionId": "bench", "lifecycleStage": "POST_SCALE_UP", "executionDetails": {},
                            "hookDetails": {}})
    t0 = time.perf_counter()
    plan = ctl.plan(a.new, a.old)
    return f"green hold {out['hookStatus']}; {plan.summary()} in {time.perf_counter() - t0:.1f} s"


def worker(a: argparse.Namespace, stamp: Stamp) -> str:
    """The geo worker: a full spec cache and the index and region of a slot in each of the last two versions."""
    import geo_service.worker  # noqa: F401  the task's module
    from geo_service.adapters.aws import make_clients
    from geo_service.serving.slots import SPEC_CACHE, SpecCache, region_of
    from geokernel.partition_spec.index import SpecIndex

    cache = SpecCache(make_clients(a.endpoint), "bench-specs")
    stamp()
    if a.floor:
        return "worker imported, clients built"
    specs = [cache.get(v) for v in range(max(1, a.new - SPEC_CACHE + 1), a.new + 1)]
    slots = [(SpecIndex(s), region_of(s, s.workers[0].id)) for s in specs[-2:]]
    return f"{len(specs)} specs cached (v{specs[0].version}..v{a.new}), {len(slots)} slot indexes"


def partitioner(a: argparse.Namespace, stamp: Stamp) -> str:
    """The partitioner Lambda: ``process_snapshot`` of the window ``a.key`` (``MAX_LOAD`` from the environment)."""
    from lambdas.partitioner import handler
    from lambdas.partitioner.logic import process_snapshot

    deps = handler.deps()
    stamp()
    if a.floor:
        return "handler imported, deps built"
    out = process_snapshot(deps, a.key)
    return f"{out.status} v{out.version} ({out.workers} workers) {out.reason[:100]}"


def peak_rss_mb() -> float:
    """This process's peak RSS in MB: ``VmHWM`` of its own memory map.

    Not ``ru_maxrss``: Linux keeps it across ``execve``, so a child forked by a big parent reports at least the
    parent's RSS at the fork (a 9 MB child of an 800 MB parent reports 812 MB)."""
    try:
        with open("/proc/self/status") as status:
            return next(int(ln.split()[1]) for ln in status if ln.startswith("VmHWM:")) / 1024.0
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child_main(a: argparse.Namespace) -> None:
    """Run one measurement in this (fresh) process and print its result line."""
    start = time.perf_counter()
    os.environ["AWS_ENDPOINT_URL"] = a.endpoint
    inited: list[float] = []
    status = globals()[a.child](a, lambda: inited.append(time.perf_counter()))
    end = time.perf_counter()
    init = (inited[0] if inited else end) - start
    print(MARK + json.dumps({"init_s": init, "work_s": end - start - init, "cpu_s": time.process_time(),
                             "rss_mb": peak_rss_mb(), "status": status}))


def run_measure(component: str, endpoint: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One measurement in a fresh interpreter (``args``: more child options); its result."""
    cmd = [sys.executable, __file__, "--child", component, "--endpoint", endpoint, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env={**os.environ, **(env or {})})
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)]
    if proc.returncode or not lines:
        raise SystemExit(f"{component} child failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len(MARK):])  # type: ignore[no-any-return]


def grow_window(s3: Any, first_key: str, step: int, growth: float) -> str:
    """Window ``step + 1``: window 1's cells, each one's events x ``(1 + growth) ** step`` x U(0.9, 1.1).

    Read back with the aggregation job's reader and written with its writer; return the manifest key.
    """
    import numpy as np
    from bench_partitioner_handler import END

    from geokernel.contracts.snapshot import SnapshotRow
    from glue_jobs.snapshot import S3Storage, SnapshotMeta, read_snapshot, write_snapshot

    storage = S3Storage("bench-snapshots", "", s3)
    manifest, text = read_snapshot(storage, first_key.rsplit("/", 1)[0])
    cells = [line.split(",", 2) for line in text.splitlines()[1:]]
    factor = (1 + growth) ** step * np.random.default_rng(step + 1).uniform(0.9, 1.1, len(cells))
    rows = [SnapshotRow(c[0], max(1, int(int(c[1]) * f)), None) for c, f in zip(cells, factor.tolist(), strict=True)]
    end = END + timedelta(minutes=5 * step)
    meta = SnapshotMeta(end - timedelta(minutes=5), end, manifest["grid_zoom"], manifest["zoom"],
                        manifest["refine_events"], step + 1)
    return str(write_snapshot(storage, rows, meta, rows_per_file=250_000).manifest_key)


def setup(endpoint: str, n: int, growth: float) -> list[str]:
    """Create the buckets and tables and write the windows; return their manifest keys."""
    import boto3
    from bench_partitioner_handler import END, write_window

    from geokernel.contracts.lease import LEASE_KEY_ATTR

    s3 = boto3.client("s3", endpoint_url=endpoint)
    ddb = boto3.client("dynamodb", endpoint_url=endpoint)
    for bucket in ("bench-snapshots", "bench-specs", "bench-costs", "bench-quarantine"):
        s3.create_bucket(Bucket=bucket)
    for table, key in (("bench-control", "pk"), ("bench-leases", LEASE_KEY_ATTR)):
        ddb.create_table(TableName=table, KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                         AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                         BillingMode="PAY_PER_REQUEST")
    first = write_window(s3, n, END, 1, 0.0)
    return [first, *(grow_window(s3, first, step, growth) for step in range(1, WINDOWS))]


def publish(endpoint: str, keys: list[str], workers: int) -> dict[str, Any]:
    """Run ``process_snapshot`` on every window, each in a cold child; return the result with the largest peak.

    ``MAX_LOAD`` (one value, as deployed): window 3's total over ``workers`` x the policy's ``target_fill``."""
    import boto3

    from partitioner.control.policy import RebalancePolicy

    manifest = boto3.client("s3", endpoint_url=endpoint).get_object(Bucket="bench-snapshots", Key=keys[-1])
    max_load = float(json.loads(manifest["Body"].read())["total_events"]) / (workers * RebalancePolicy().target_fill)
    peak: dict[str, Any] = {"rss_mb": 0.0}
    for i, key in enumerate(keys):
        out = run_measure("partitioner", endpoint, "--key", key, env={"MAX_LOAD": str(max_load)})
        print(f"partitioner window {i + 1}: max_load {max_load:,.0f}, {out['work_s']:.1f} s, "
              f"{out['rss_mb']:,.0f} MB peak: {out['status']}", flush=True)
        if not out["status"].startswith(f"published v{i + 1} "):
            raise SystemExit(f"window {i + 1} was not published as v{i + 1}: {out['status']}")
        peak = max(peak, out, key=lambda r: float(r["rss_mb"]))
    return peak


def spec_sizes(endpoint: str, version: int) -> dict[str, int]:
    """Bytes, workers, partitions and listed entries of the stored spec ``version``."""
    import boto3

    from geokernel.contracts.spec_pointer import spec_key

    body = boto3.client("s3", endpoint_url=endpoint).get_object(Bucket="bench-specs", Key=spec_key(version))["Body"]
    raw = body.read()
    doc = json.loads(raw)
    return {"bytes": len(raw), "workers": len(doc["workers"]), "partitions": len(doc["partitions"]),
            "entries": sum(len(p["quadkeys"]) for p in doc["partitions"])}


def reset_control(endpoint: str, old: int, new: int) -> None:
    """Active pointer at ``old``; ``new`` waiting for green (started now). No child stores a plan."""
    import boto3

    from geokernel.contracts.control import ControlKey, DeployState, DeployStatus
    from geokernel.contracts.spec_pointer import ActivePointer, spec_key
    from lambdas.runtime.dynamodb import ControlTable

    control = ControlTable(boto3.client("dynamodb", endpoint_url=endpoint), "bench-control")
    control.put(ControlKey.ACTIVE, ActivePointer(old, spec_key(old), f"bench-geo-v{old}", "2026-11-26T00:00:00Z").to_item())
    now = time.time()
    state = DeployState(version=new, status=DeployStatus.WAITING_GREEN.value, started_at=now, updated_at=now,
                        reason="bench", old_version=old, stage_since=now, rev=1)
    control.put(ControlKey.DEPLOY, state.to_item())


def configured_mb() -> dict[str, int]:
    """Each component's configured memory, from the stack's constants."""
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,20")  # about the machine's node
    from infra.config import DEFAULTS
    from infra.deploy import CONTROL_MEMORY_MB
    from infra.partitioner_fn import PARTITIONER_MEMORY_MB
    from infra.router import ROUTER_MEMORY_MB

    return {"router": ROUTER_MEMORY_MB, "deployer": CONTROL_MEMORY_MB, "hooks": CONTROL_MEMORY_MB,
            "worker": int(DEFAULTS["worker_memory_mib"]), "partitioner": PARTITIONER_MEMORY_MB}


def timeouts_s() -> dict[str, float]:
    """Each Lambda's timeout in seconds, from the stack's constants (the worker, an ECS task, has none)."""
    from infra.deploy import DEPLOYER_TIMEOUT, HOOKS_TIMEOUT
    from infra.partitioner_fn import PARTITIONER_TIMEOUT
    from infra.router import ROUTER_TIMEOUT

    return {"router": ROUTER_TIMEOUT.to_seconds(), "deployer": DEPLOYER_TIMEOUT.to_seconds(),
            "hooks": HOOKS_TIMEOUT.to_seconds(), "partitioner": PARTITIONER_TIMEOUT.to_seconds()}


def report(results: dict[str, tuple[dict[str, Any], dict[str, Any]]], spec: dict[str, int], quadkeys: int) -> bool:
    """Print the table and the extrapolated largest spec; True when every component has the headroom."""
    cfg, limit = configured_mb(), timeouts_s()
    ok = True
    print(f"\n{'component':<12}{'floor MB':>9}{'peak MB':>9}{'config MB':>10}{'ratio':>7}  verdict"
          f"{'init s':>9}{'work s':>8}{'CPU s':>8}{'on Lambda s':>12}{'timeout s':>10}")
    for name, (floor, full) in results.items():
        peak = full["rss_mb"]
        on_lambda = full["cpu_s"] * max(1.0, VCPU_MB / cfg[name])
        in_time = name not in limit or on_lambda <= TIME_SHARE * limit[name]
        passed = peak <= HEADROOM * cfg[name] and in_time
        ok &= passed
        timing = f"{on_lambda:>12.1f}{limit[name]:>10.0f}" if name in limit else f"{'-':>12}{'-':>10}"
        print(f"{name:<12}{floor['rss_mb']:>9.0f}{peak:>9.0f}{cfg[name]:>10}{cfg[name] / peak:>7.2f}  "
              f"{'PASS' if passed else 'FAIL':<7}{full['init_s']:>9.1f}{full['work_s']:>8.1f}{full['cpu_s']:>8.1f}"
              f"{timing}")
    print(f"\nlargest spec each can hold (linear extrapolation from floor and measured increment, an estimate; "
          f"measured: {spec['bytes'] / 1e6:.1f} MB JSON from {quadkeys:,} quadkeys):")
    for name, (floor, full) in results.items():
        grow = full["rss_mb"] - floor["rss_mb"]
        if grow <= 0:
            print(f"  {name:<12} no measurable increment at this size")
            continue
        scale = [(share * cfg[name] - floor["rss_mb"]) / grow for share in (HEADROOM, 1.0)]
        print(f"  {name:<12} {grow:,.0f} MB above the floor; at 75 %: x{scale[0]:.1f} = "
              f"{spec['bytes'] * scale[0] / 1e6:,.0f} MB JSON ~ {quadkeys * scale[0] / 1e6:.1f}M quadkeys; "
              f"at 100 %: x{scale[1]:.1f} ~ {quadkeys * scale[1] / 1e6:.1f}M quadkeys")
    return ok


def run(args: argparse.Namespace) -> bool:
    """The parent: moto, the specs, every measurement, the report."""
    from bench_partitioner_handler import ENV

    from local.aws import SerialMotoServer

    os.environ.update(ENV, **EXTRA_ENV)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = SerialMotoServer().start()
    results: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    try:
        started = time.monotonic()
        keys = setup(server.url, args.quadkeys, args.growth)
        print(f"snapshots: {WINDOWS} windows of {args.quadkeys:,} quadkeys ({time.monotonic() - started:.0f} s)")
        partitioner_peak = publish(server.url, keys, args.workers)
        old, new = WINDOWS - 1, WINDOWS
        sizes = {v: spec_sizes(server.url, v) for v in range(1, WINDOWS + 1)}
        for v, s in sizes.items():
            print(f"spec v{v}: {s['bytes']:,} bytes JSON, {s['workers']:,} workers, {s['partitions']:,} partitions, "
                  f"{s['entries']:,} listed entries")
        for name in COMPONENTS:
            reset_control(server.url, old, new)
            versions = ("--old", str(old), "--new", str(new))
            floor = run_measure(name, server.url, *versions, "--floor")
            full = run_measure(name, server.url, *versions) if name != "partitioner" else partitioner_peak
            results[name] = (floor, full)
            print(f"{name:<12} floor {floor['rss_mb']:7.0f} MB ({floor['init_s']:.1f} s), spec path "
                  f"{full['rss_mb']:7.0f} MB ({full['work_s']:.1f} s): {full['status']}", flush=True)
    finally:
        server.stop()
    return report(results, sizes[new], args.quadkeys)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quadkeys", type=int, default=4_000_000)
    ap.add_argument("--workers", type=int, default=1000, help="sets MAX_LOAD: about this many in the live spec")
    ap.add_argument("--growth", type=float, default=0.15, help="load growth from one window to the next")
    ap.add_argument("--child", choices=COMPONENTS, help=argparse.SUPPRESS)
    ap.add_argument("--endpoint", help=argparse.SUPPRESS)
    ap.add_argument("--old", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--new", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--floor", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--key", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_main(args)
        return 0
    t0 = time.monotonic()
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs")
    ok = run(args)
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; bench wall time "
          f"{time.monotonic() - t0:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
