"""Spark aggregation job: location events -> windowed load per quadkey -> load snapshots.

One job, whichever engine runs it (EMR Serverless, Glue streaming, or local Spark), in the shape
extract -> pure transforms -> load::

    source records (value, source)                     emr_entry / glue_entry / quadkey_counts
      -> events.classify_events, valid_events          validation; the rest -> quarantine_records
      -> transform.aggregate_cells                     quadkeys at zoom, event-time windows
      -> transform.with_cost, rollup_quadtree          the snapshot rows
      -> snapshot.write_snapshot                       data files, manifest last

Modules
-------
events
    Event validation and quarantine as column expressions (CONTRACTS.md "Events").
quadkeys
    Native tile / quadkey expressions (mercantile semantics, the same arithmetic as ``geokernel.geo.tiles``).
transform
    The aggregation transforms: windowed counts, cost join, quadtree rollup.
snapshot
    Storage adapter (local directory or S3) and the snapshot / quarantine writers.
window_state
    The open windows kept across micro-batches (Spark's append-mode watermark rules).
batch
    The foreachBatch bodies shared by every streaming entry point.
quadkey_counts
    Local runner (``python -m glue_jobs.quadkey_counts``): batch over JSON-lines files, or
    streaming from Kinesis through :mod:`glue_jobs.kinesis_source` (Spark 4 only).
emr_entry, glue_entry
    EMR Serverless (Spark 4.0, bundled ``aws-kinesis`` connector) and Glue 5.1 streaming
    (Spark 3.5) entry points.
errors
    :class:`~glue_jobs.errors.AggregationError`, the base of every error the package raises.
"""
