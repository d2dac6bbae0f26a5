"""A PySpark Python streaming data source over boto3 Kinesis (Spark 4.0+; works against moto server).

Used by the local runner (``python -m glue_jobs.quadkey_counts --kinesis-stream ...``); in AWS
the EMR entry point uses the runtime's bundled ``aws-kinesis`` connector instead.

Usage::

    from glue_jobs.kinesis_source import register
    register(spark)
    raw = (spark.readStream.format("geo_kinesis")
           .option("stream_name", "georebal-ingest")
           .option("endpoint_url", "http://127.0.0.1:5000")   # optional (moto); else AWS_ENDPOINT_URL
           .option("region", "us-east-1")                     # optional; else AWS_DEFAULT_REGION
           .option("starting_position", "LATEST")             # optional; default TRIM_HORIZON
           .load())                                           # data, source, stream, shard_id, ...

Notes
-----
* Offsets are ``{"shards": {shard_id: last sequence number read, or "" for none}}``. On a fresh
  checkpoint every shard starts at TRIM_HORIZON (the default: it makes replays deterministic) or, with
  ``starting_position=LATEST``, at the stream's tip as the EMR job's connector does: ``"@<epoch ms>"``,
  the records that arrived at or after the query's first offsets were taken (``AT_TIMESTAMP``), so a
  replay of a batch reads the same records. Shards appearing later (resharding) start at TRIM_HORIZON.
* It is a :class:`~pyspark.sql.datasource.SimpleDataSourceStreamReader`: records are fetched
  on the driver, at most ``max_records_per_shard`` (default 10000) per shard per micro-batch.
  On restart from a checkpoint Spark replays a batch with :meth:`readBetweenOffsets`, which
  re-reads exactly the records between the two offsets.
* ``source`` of a record is ``<stream>/<shard_id>/<sequence_number>`` (CONTRACTS.md quarantine).
* ``data`` is the record's bytes, as the ``aws-kinesis`` connector's ``data`` column: KPL aggregated records are
  split into their user records by :func:`glue_jobs.events.deaggregate_records`, which also turns the bytes
  into the ``value`` text the JSON parse reads (bytes that are not UTF-8 are then quarantined as unparsable JSON).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader

SOURCE_NAME = "geo_kinesis"
SCHEMA = ("data binary, source string, stream string, shard_id string, sequence_number string, "
          "partition_key string, arrival_ts timestamp")

Row = tuple[bytes, str, str, str, str, str, datetime | None]


class KinesisDataSource(DataSource):
    """``spark.readStream.format("geo_kinesis")``: options ``stream_name`` (required),
    ``endpoint_url``, ``region``, ``max_records_per_shard``, ``starting_position``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def simpleStreamReader(self, schema: Any) -> SimpleDataSourceStreamReader:
        return KinesisStreamReader(dict(self.options))


class KinesisStreamReader(SimpleDataSourceStreamReader):
    """Reads every shard of one stream from TRIM_HORIZON (or its tip) with GetRecords."""

    def __init__(self, options: dict[str, str]) -> None:
        stream = options.get("stream_name") or options.get("streamName")
        if not stream:
            raise ValueError(f"geo_kinesis: option 'stream_name' is required, got options {sorted(options)!r}")
        self.stream = stream
        self.endpoint_url = options.get("endpoint_url") or os.environ.get("AWS_ENDPOINT_URL") or None
        self.region = options.get("region") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        raw_max = options.get("max_records_per_shard", "10000")
        try:
            self.max_records = int(raw_max)
        except ValueError:
            raise ValueError(f"geo_kinesis: max_records_per_shard must be an integer, got {raw_max!r}") from None
        if self.max_records < 1:
            raise ValueError(f"geo_kinesis: max_records_per_shard must be >= 1, got {raw_max!r}")
        self.starting_position = options.get("starting_position", "TRIM_HORIZON").upper()
        if self.starting_position not in ("TRIM_HORIZON", "LATEST"):
            raise ValueError(f"geo_kinesis: starting_position must be TRIM_HORIZON or LATEST, "
                             f"got {options.get('starting_position')!r}")
        self._client: Any = None

    # -- Spark API --------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        start = "" if self.starting_position == "TRIM_HORIZON" else f"@{int(time.time() * 1000)}"
        return {"shards": dict.fromkeys(self._shard_ids(), start)}

    def read(self, start: dict[str, Any]) -> tuple[Iterator[Row], dict[str, Any]]:
        positions = dict(start.get("shards", {}))
        for shard in self._shard_ids():
            positions.setdefault(shard, "")
        rows: list[Row] = []
        end = dict(positions)
        for shard, after in sorted(positions.items()):
            got = self._read_shard(shard, after, None, self.max_records)
            if got:
                rows.extend(got)
                end[shard] = got[-1][4]
        return iter(rows), {"shards": end}

    def readBetweenOffsets(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[Row]:
        rows: list[Row] = []
        starts = start.get("shards", {})
        for shard, last in sorted(end.get("shards", {}).items()):
            after = starts.get(shard, "")
            if last and last != after:
                rows.extend(self._read_shard(shard, after, last, None))
        return iter(rows)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: offsets live in Spark's checkpoint."""

    # -- Kinesis ----------------------------------------------------------

    def _kinesis(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.client("kinesis", endpoint_url=self.endpoint_url, region_name=self.region)
        return self._client

    def _shard_ids(self) -> list[str]:
        client = self._kinesis()
        shards: list[str] = []
        kwargs: dict[str, Any] = {"StreamName": self.stream}
        while True:
            resp = client.list_shards(**kwargs)
            shards.extend(s["ShardId"] for s in resp.get("Shards", []))
            token = resp.get("NextToken")
            if not token:
                return sorted(shards)
            kwargs = {"NextToken": token}

    def _read_shard(self, shard: str, after: str, until: str | None, limit: int | None) -> list[Row]:
        """Records of ``shard`` after sequence ``after`` ("" = from the start, "@<ms>" = arrived at or after that
        time), up to ``until`` inclusive."""
        client = self._kinesis()
        if after.startswith("@"):
            it = client.get_shard_iterator(StreamName=self.stream, ShardId=shard, ShardIteratorType="AT_TIMESTAMP",
                                           Timestamp=datetime.fromtimestamp(int(after[1:]) / 1000, UTC)
                                           )["ShardIterator"]
        elif after:
            it = client.get_shard_iterator(StreamName=self.stream, ShardId=shard,
                                           ShardIteratorType="AFTER_SEQUENCE_NUMBER",
                                           StartingSequenceNumber=after)["ShardIterator"]
        else:
            it = client.get_shard_iterator(StreamName=self.stream, ShardId=shard,
                                           ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        out: list[Row] = []
        stop_at = int(until) if until else None
        while it:
            want = 10000 if limit is None else min(10000, limit - len(out))
            resp = client.get_records(ShardIterator=it, Limit=want)
            records = resp.get("Records", [])
            for rec in records:
                seq = rec["SequenceNumber"]
                if stop_at is not None and int(seq) > stop_at:
                    return out
                data = rec["Data"]
                out.append((data if isinstance(data, bytes) else str(data).encode(), f"{self.stream}/{shard}/{seq}",
                            self.stream, shard, seq, rec.get("PartitionKey", ""),
                            rec.get("ApproximateArrivalTimestamp")))
                if stop_at is not None and int(seq) == stop_at:
                    return out
            if not records or (limit is not None and len(out) >= limit):
                return out
            it = resp.get("NextShardIterator")
        return out


def register(spark: Any) -> None:
    """Register the ``geo_kinesis`` source on ``spark`` (Spark 4.0+)."""
    spark.dataSource.register(KinesisDataSource)
