"""Spark aggregation job: location events -> windowed load per quadkey -> load snapshots.

Modules
-------
transform
    Pure DataFrame transforms (no paths, no sessions): validation and quarantine, native
    quadkey expression, windowed aggregation, quadtree rollup, cost join.
snapshot
    Storage adapter (local directory or S3) and the snapshot / quarantine writers.
batch
    The foreachBatch bodies shared by every streaming entry point.
quadkey_counts
    Local runner (``python -m aggregation.quadkey_counts``): batch over JSON-lines files, or
    streaming from Kinesis through :mod:`aggregation.kinesis_source` (Spark 4 only).
emr_entry, glue_entry
    EMR Serverless (Spark 4.0, bundled ``aws-kinesis`` connector) and Glue 5.1 streaming
    (Spark 3.5) entry points.
"""
