"""The output as a data product: a Glue database and table over the enriched output, with Athena partition
projection, and the SQL of a view that keeps each event once.

The table reads ``s3://<OutputBucket>/enriched/`` as the workers write it (``geokernel/contracts/enriched.py``):
gzip'd JSON lines (the OpenX JSON SerDe; Athena reads ``.gz`` objects as gzip,
https://docs.aws.amazon.com/athena/latest/ug/compression-formats.html) in Hive-style folders ``dt=<YYYY-MM-DD>/
hour=<HH>/`` of the events' own UTC hour. The partitions are projected, never registered
(https://docs.aws.amazon.com/athena/latest/ug/partition-projection.html; the properties:
https://docs.aws.amazon.com/athena/latest/ug/partition-projection-supported-types.html and
https://docs.aws.amazon.com/athena/latest/ug/partition-projection-setting-up.html): ``dt`` is a ``date`` from
:data:`PROJECTION_FROM` to ``NOW+1DAYS``, ``hour`` an ``integer`` 0-23 of 2 digits, and ``storage.location.template``
names the folders, so an hour's objects are in the table the moment a worker writes them (a late event too) and a
query on ``dt``/``hour`` reads only those folders. Always filter on ``dt``: without it Athena tries every day of
the range.

The columns are the stable fields of every record: the event's own (``event_id``, ``entity_id``, ``ts`` as sent:
epoch milliseconds or ISO-8601 text, hence a string; ``lat``, ``lon``) and the routing ids the worker adds. A
transform's fields are not columns (each transform has its own): add them to the table (``ALTER TABLE ... ADD
COLUMNS``; the SerDe maps a column to the JSON key of its name), or read the raw JSON through a one-column text
table over the same folders (docs/DEPLOY.md "Querying the output").

Delivery is at-least-once: :func:`dedupe_view_sql` is the view that keeps each event's first copy (the one
processed first, :data:`geokernel.contracts.enriched.FIRST_COPY_ORDER`). The stack shows it as an output
(``OutputDedupeViewSql``, run once in Athena) with the database and table names; docs/DEPLOY.md "Querying the
output" has examples.
"""

from __future__ import annotations

from aws_cdk import Aws, CfnOutput
from aws_cdk import aws_glue as glue
from aws_cdk import aws_s3 as s3
from constructs import Construct

from geokernel.contracts.enriched import DT_JAVA_FORMAT, ENRICHED_PREFIX, FIRST_COPY_ORDER, PARTITION_TEMPLATE
from infra.config import GeoConfig

TABLE = "enriched"
VIEW = "enriched_unique"
#: The first day the table projects (``projection.dt.range``): earlier events are in the bucket but not in the table.
PROJECTION_FROM = "2000-01-01"
#: The stable fields of every record (their JSON keys) and their Hive types.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("event_id", "string"), ("entity_id", "string"), ("ts", "string"), ("ts_ms", "bigint"), ("lat", "double"),
    ("lon", "double"),
    ("spec_version", "int"), ("worker_id", "string"), ("partition_id", "string"), ("stray", "boolean"),
    ("owner", "string"), ("processed_at", "bigint"),
)
#: The partition columns, in the order of the folders.
PARTITION_COLUMNS = ("dt", "hour")
SERDE = "org.openx.data.jsonserde.JsonSerDe"


def database_name(config: GeoConfig) -> str:
    """The Glue database of a deployment: ``<prefix>_output`` (Athena names: lowercase letters, digits, ``_``)."""
    return f"{config.prefix.replace('-', '_')}_output"


def projection(bucket_name: str) -> dict[str, str]:
    """The table properties of the partition projection over ``bucket_name``'s enriched output."""
    return {
        "projection.enabled": "true",
        "projection.dt.type": "date",
        "projection.dt.format": DT_JAVA_FORMAT,
        "projection.dt.range": f"{PROJECTION_FROM},NOW+1DAYS",
        "projection.dt.interval": "1",
        "projection.dt.interval.unit": "DAYS",
        "projection.hour.type": "integer",
        "projection.hour.range": "0,23",
        "projection.hour.digits": "2",
        "storage.location.template": f"s3://{bucket_name}/{PARTITION_TEMPLATE}",
    }


def dedupe_view_sql(database: str, table: str = TABLE, view: str = VIEW) -> str:
    """``CREATE OR REPLACE VIEW`` of each event's first copy (Athena SQL).

    The window is per ``dt``, ``hour`` and ``event_id``: every copy of an event has the event's time, so all are in
    the same hour's folder, and a query on the view that filters ``dt``/``hour`` still reads only those folders
    (a filter goes below a window only on its PARTITION BY columns)."""
    columns = ", ".join([name for name, _ in COLUMNS] + list(PARTITION_COLUMNS))
    order = ", ".join(FIRST_COPY_ORDER)
    return (f'CREATE OR REPLACE VIEW "{database}"."{view}" AS SELECT {columns} FROM (SELECT *, row_number() OVER '
            f"(PARTITION BY dt, hour, event_id ORDER BY {order}) AS n FROM \"{database}\".\"{table}\") WHERE n = 1")


class OutputCatalog(Construct):
    """The database, the table and the outputs ``OutputDatabase``, ``OutputTable``, ``OutputDedupeViewSql``."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GeoConfig, output: s3.IBucket) -> None:
        super().__init__(scope, construct_id)
        self.database_name = database_name(config)
        self.database = glue.CfnDatabase(
            self, "Database", catalog_id=Aws.ACCOUNT_ID,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=self.database_name, description=f"{config.prefix}: the geo workers' enriched output"))
        self.table = glue.CfnTable(
            self, "Table", catalog_id=Aws.ACCOUNT_ID, database_name=self.database_name,
            table_input=glue.CfnTable.TableInputProperty(
                name=TABLE, table_type="EXTERNAL_TABLE",
                description="Enriched records by event hour, gzip'd JSON lines, at-least-once (dedupe by event_id: "
                            f"view {VIEW}); a transform's fields: add them as columns (docs/DEPLOY.md)",
                parameters={"classification": "json", "compressionType": "gzip", **projection(output.bucket_name)},
                partition_keys=[glue.CfnTable.ColumnProperty(name=c, type="string") for c in PARTITION_COLUMNS],
                storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                    columns=[glue.CfnTable.ColumnProperty(name=n, type=t) for n, t in COLUMNS],
                    location=f"s3://{output.bucket_name}/{ENRICHED_PREFIX}",
                    input_format="org.apache.hadoop.mapred.TextInputFormat",
                    output_format="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                    compressed=True,
                    serde_info=glue.CfnTable.SerdeInfoProperty(serialization_library=SERDE),
                ),
            ),
        )
        self.table.node.add_dependency(self.database)
        for key, value, description in (
            ("OutputDatabase", self.database_name, "Glue database of the enriched output (Athena)"),
            ("OutputTable", TABLE, "Glue table of the enriched output, partitioned by event hour (dt, hour)"),
            ("OutputDedupeViewSql", dedupe_view_sql(self.database_name),
             f"Athena SQL of the view {VIEW}: each event once (run it once; docs/DEPLOY.md)"),
        ):
            CfnOutput(self, key, value=value, description=description).override_logical_id(key)
