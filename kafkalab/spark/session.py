"""A local SparkSession for the labs and tests, with the `kafkalab` source registered.

    with local_spark() as spark:
        spark.read.format("kafkalab")...

Modest by default (two cores, no UI, few shuffle partitions): the labs share a
small machine with three brokers. Spark's Python workers run this interpreter
(`sys.executable`), so they import the same kafkalab and confluent-kafka.

The driver's heap is `KAFKALAB_SPARK_DRIVER_MEMORY` (a JVM size such as `1g`;
2g when unset): a hosted Binder with about 2 GB for everything sets 1g.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path


def register(spark) -> None:
    """Make `spark.read.format("kafkalab")` (and write, readStream, writeStream) work."""
    from kafkalab.spark.source import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)


DRIVER_MEMORY_ENV = "KAFKALAB_SPARK_DRIVER_MEMORY"
DEFAULT_DRIVER_MEMORY = "2g"


def spark_settings(cores: int = 2, **conf: str) -> dict[str, str]:
    """The Spark configuration `build_local_spark` starts with (`conf` overrides it)."""
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(max(2, cores)),
        "spark.default.parallelism": str(max(2, cores)),
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.driver.memory": os.environ.get(DRIVER_MEMORY_ENV) or DEFAULT_DRIVER_MEMORY,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        **conf,
    }


def build_local_spark(cores: int = 2, app_name: str = "kafkalab", **conf: str):
    """Start (or join) a local SparkSession and register the source."""
    from pyspark.sql import SparkSession

    # Spark's Python workers are started by the JVM, which inherits this
    # environment: put kafkalab's directory on their path so they import this copy.
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH", "")
    if root not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, path) if p)
    # The JVM starts Python workers with PYSPARK_PYTHON (or `python3` on PATH),
    # not always with spark.pyspark.python: name this interpreter in both.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = spark_settings(cores, **conf)
    builder = SparkSession.builder.master(f"local[{cores}]").appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


@contextmanager
def local_spark(cores: int = 2, app_name: str = "kafkalab", **conf: str):
    """A local SparkSession that is stopped (its JVM too) when the block ends."""
    spark = build_local_spark(cores, app_name, **conf)
    try:
        yield spark
    finally:
        spark.stop()
