"""infra.catalog: the Glue table over the enriched output (partition projection by event hour) and the dedupe view."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match

from geokernel.contracts.enriched import FIRST_COPY_ORDER, ROUTING_FIELDS, hour_prefix
from geokernel.contracts.events import REQUIRED_FIELDS
from geokernel.contracts.timestamps import EVENT_TIME_FIELD
from infra.catalog import COLUMNS, PARTITION_COLUMNS, TABLE, VIEW, dedupe_view_sql, projection


def _output_bucket(synth: Any) -> str:
    buckets = [k for k in synth.resources("AWS::S3::Bucket") if k.startswith("StorageOutput")]
    assert len(buckets) == 1, buckets
    return buckets[0]


def test_the_table_reads_the_gzipd_json_lines_under_enriched_with_hour_partitions_projected(emr: Any) -> None:
    # GIVEN the synthesized stack WHEN its Glue table is read
    bucket = {"Ref": _output_bucket(emr)}
    # THEN it is an external table of the database, over s3://<output>/enriched/, JSON SerDe, compressed
    emr.template.has_resource_properties("AWS::Glue::Database", {"DatabaseInput": {"Name": "georebal_output"}})
    emr.template.has_resource_properties("AWS::Glue::Table", {
        "DatabaseName": "georebal_output",
        "TableInput": {
            "Name": TABLE, "TableType": "EXTERNAL_TABLE",
            "PartitionKeys": [{"Name": "dt", "Type": "string"}, {"Name": "hour", "Type": "string"}],
            "StorageDescriptor": Match.object_like({
                "Location": {"Fn::Join": ["", ["s3://", bucket, "/enriched/"]]},
                "Compressed": True,
                "SerdeInfo": {"SerializationLibrary": "org.openx.data.jsonserde.JsonSerDe"},
                "Columns": [{"Name": n, "Type": t} for n, t in COLUMNS],
            }),
            # AND the partitions are projected: dt a date, hour 00..23, at the folders the workers write
            "Parameters": Match.object_like({
                "projection.enabled": "true", "projection.dt.type": "date", "projection.dt.format": "yyyy-MM-dd",
                "projection.hour.type": "integer", "projection.hour.range": "0,23", "projection.hour.digits": "2",
                "storage.location.template": {"Fn::Join": ["", ["s3://", bucket, "/enriched/dt=${dt}/hour=${hour}/"]]},
            }),
        },
    })
    # AND the table is created after its database
    (database,), (table,) = emr.resources("AWS::Glue::Database"), emr.resources("AWS::Glue::Table").values()
    assert database in table["DependsOn"]
    # AND the database and table names and the view's SQL are outputs
    outputs = emr.template.to_json()["Outputs"]
    assert outputs["OutputDatabase"]["Value"] == "georebal_output" and outputs["OutputTable"]["Value"] == TABLE
    assert outputs["OutputDedupeViewSql"]["Value"] == dedupe_view_sql("georebal_output")


def test_the_location_template_gives_the_folder_a_worker_writes_an_events_hour_to() -> None:
    # GIVEN an event at 2025-11-21T04:40:00Z WHEN Athena fills the template with dt and a 2-digit hour
    template = projection("b")["storage.location.template"]
    # THEN it is the folder of the worker's key for that event
    assert template.replace("${dt}", "2025-11-21").replace("${hour}", "04") == f"s3://b/{hour_prefix(1_763_700_000_000)}"


def test_the_columns_are_fields_every_record_has() -> None:
    # GIVEN the table's columns WHEN compared with the record contract THEN each is an event field, the event time the
    # worker read (ts_ms, under the deployment's ts_unit) or a routing id
    assert {n for n, _ in COLUMNS} <= set(REQUIRED_FIELDS) | {EVENT_TIME_FIELD} | set(ROUTING_FIELDS)
    assert set(REQUIRED_FIELDS) <= {n for n, _ in COLUMNS} and "processed_at" in {n for n, _ in COLUMNS}


def test_the_view_keeps_the_first_copy_of_each_event_from_the_table() -> None:
    # GIVEN the view's SQL for a database
    sql = dedupe_view_sql("db")
    # THEN it creates the view from the table, numbering each event's copies within its hour by the first-copy order
    assert sql.startswith(f'CREATE OR REPLACE VIEW "db"."{VIEW}" AS SELECT ')
    assert f'FROM "db"."{TABLE}")' in sql and sql.endswith("WHERE n = 1")
    assert f"row_number() OVER (PARTITION BY dt, hour, event_id ORDER BY {', '.join(FIRST_COPY_ORDER)}) AS n" in sql
    # AND it selects the columns and the partitions, not the copy number
    assert f"SELECT event_id, entity_id, ts, {EVENT_TIME_FIELD}, lat, lon, " in sql and ", ".join(PARTITION_COLUMNS) + " FROM (" in sql
