"""Benchmark: quadkey aggregation throughput, native Spark expression vs a mercantile Python UDF vs bare groupBy.

Run::

    .venv/bin/python bench/bench_aggregation.py [--events 2000000] [--zoom 18] [--repeat 3] [--cores 2]

All three variants run in one Spark session on the same cached DataFrame of random points:

* ``bare``: ``groupBy(<precomputed cell key column>).count()``, the aggregation alone (baseline);
* ``native``: the job's hot path (``transform.aggregate_cells`` without windows):
  ``groupBy(with_cell_key(...)).count()`` (native cell key) then the quadkey string per cell;
* ``udf``: ``groupBy(python_udf(mercantile.quadkey(mercantile.tile(lon, lat, zoom)))).count()``.

Points are clustered by default (``--distribution clustered``: 200 Gaussian hot spots, about
how location events look: many events per zoom-18 cell); ``uniform`` spreads them over the world
(nearly every event its own cell, so the aggregation itself dominates every variant).

Each is executed into Spark's ``noop`` sink (full evaluation, no output I/O), once to warm up
and then ``--repeat`` times; the best time counts. Prints events per second per core and the
ratios against the baseline measured in the same run. Targets: native >= 10x the UDF,
native within 2x of bare (bare_time / native_time >= 0.5). ``--strict`` exits 1 when missed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from glue_jobs.quadkeys import cell_key_expr, quadkey_of_cell, with_cell_key  # noqa: E402


def make_session(cores: int) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(f"local[{cores}]").appName("bench-aggregation")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(cores)).config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def points(spark: SparkSession, n: int, zoom: int, cores: int, distribution: str) -> DataFrame:
    """``n`` random points (lon, lat) plus their precomputed cell key, cached and materialised."""
    ids = spark.range(n, numPartitions=cores * 2)
    if distribution == "uniform":
        df = ids.select((F.rand(1) * 360.0 - 180.0).alias("lon"), (F.rand(2) * 170.0 - 85.0).alias("lat"))
    else:
        hot = (F.col("id") % 200).cast("double")
        df = ids.select(
            F.least(F.greatest(F.sin(hot * 12.9898) * 170.0 + F.randn(1) * 0.002, F.lit(-180.0)), F.lit(180.0))
            .alias("lon"),
            F.least(F.greatest(F.cos(hot * 78.233) * 70.0 + F.randn(2) * 0.002, F.lit(-85.0)), F.lit(85.0))
            .alias("lat"))
    df = df.withColumn("code_pre", cell_key_expr(F.col("lon"), F.col("lat"), zoom)).cache()
    df.count()
    return df


def mercantile_udf(zoom: int) -> Callable[..., object]:
    import mercantile

    def qk(lon: float, lat: float) -> str:
        return str(mercantile.quadkey(mercantile.tile(lon, lat, zoom)))

    return F.udf(qk, "string")


def timed(run: Callable[[], None], repeat: int) -> float:
    """Best wall time of ``repeat`` runs after one warm-up."""
    run()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return best


def sink(df: DataFrame) -> Callable[[], None]:
    return lambda: df.write.format("noop").mode("overwrite").save()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--udf-events", type=int, default=None, help="events for the UDF run (default: same as --events)")
    p.add_argument("--zoom", type=int, default=18)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--distribution", choices=("clustered", "uniform"), default="clustered")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = p.parse_args(argv)
    spark = make_session(args.cores)
    df = points(spark, args.events, args.zoom, args.cores, args.distribution)
    udf_n = args.udf_events or args.events
    udf_df = df if udf_n == args.events else df.limit(udf_n).cache()
    if udf_df is not df:
        udf_df.count()
    qk_udf = mercantile_udf(args.zoom)
    native = (with_cell_key(df.select("lon", "lat"), args.zoom, out_col="code").groupBy("code").count()
              .select(quadkey_of_cell(F.col("code"), args.zoom).alias("quadkey"), "count"))
    results = {
        "bare": (args.events, timed(sink(df.groupBy("code_pre").count()), args.repeat)),
        "native": (args.events, timed(sink(native), args.repeat)),
        "udf": (udf_n, timed(sink(udf_df.groupBy(qk_udf("lon", "lat").alias("qk")).count()), max(1, args.repeat - 2))),
    }
    rate = {k: n / t / args.cores for k, (n, t) in results.items()}
    print(f"quadkey aggregation, {args.distribution} points, zoom {args.zoom}, {args.events:,} events "
          f"({udf_n:,} for the UDF), "
          f"local[{args.cores}], best of {args.repeat}")
    print(f"{'variant':8} {'seconds':>9} {'events/s/core':>15}")
    for k, (_, t) in results.items():
        print(f"{k:8} {t:9.3f} {rate[k]:15,.0f}")
    native_vs_udf = rate["native"] / rate["udf"]
    native_vs_bare = rate["native"] / rate["bare"]
    ok_udf, ok_bare = native_vs_udf >= 10, native_vs_bare >= 0.5
    print(f"native / udf  throughput ratio: {native_vs_udf:6.1f}x  (target >= 10x)   {'OK' if ok_udf else 'MISSED'}")
    print(f"native / bare throughput ratio: {native_vs_bare:6.2f}   (target >= 0.5)  {'OK' if ok_bare else 'MISSED'}")
    spark.stop()
    return 1 if args.strict and not (ok_udf and ok_bare) else 0


if __name__ == "__main__":
    sys.exit(main())
