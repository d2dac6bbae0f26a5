"""One session-scoped local Spark for every aggregation test (local[2], 2 shuffle partitions, UI off)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

#: The PySpark line this run is on: 4 (EMR Serverless, .venv) or 3 (Glue 5.1, the gate's .venv-spark35).
SPARK_MAJOR = int(pyspark.__version__.split(".")[0])


def spark4_only(reason: str) -> pytest.MarkDecorator:
    """Skip on the Spark 3.5 line, saying why."""
    return pytest.mark.skipif(SPARK_MAJOR < 4, reason=reason)

from pyspark.sql import SparkSession  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from glue_jobs.quadkey_counts import LOCAL_JAVA_OPTIONS  # noqa: E402


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The shared local Spark session."""
    # Python workers inherit the JVM's environment, fixed here: dummy credentials so boto3 inside
    # the Kinesis source never looks further (tests only ever talk to moto on 127.0.0.1).
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(key, value)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("geo-rebalancer-tests")
        .config("spark.driver.extraJavaOptions", LOCAL_JAVA_OPTIONS)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.streaming.stateStore.providerClass",
                "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
