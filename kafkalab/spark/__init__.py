"""A PySpark data source for Kafka topics, with the options, schema and semantics of
Spark's built-in Kafka source and sink; executors read with kafkalab's own Fetch
(librdkafka where an option needs it) and write with librdkafka (confluent-kafka).

    from kafkalab.spark import KafkaDataSource
    spark.dataSource.register(KafkaDataSource)            # then format("kafkalab")

Pure pieces (options, offsets, planning) import without pyspark; the data source
itself needs pyspark >= 4.0, pyarrow and numpy, and its own fetch numba.
"""

from kafkalab.spark.errors import KafkaDataLossError, KafkaSourceOptionError, KafkaWriteError
from kafkalab.spark.session import build_local_spark, local_spark, register


def __getattr__(name: str):
    if name == "KafkaDataSource":  # imports pyspark: only when asked for
        from kafkalab.spark.source import KafkaDataSource

        return KafkaDataSource
    raise AttributeError(name)


__all__ = [
    "KafkaDataLossError",
    "KafkaDataSource",
    "KafkaSourceOptionError",
    "KafkaWriteError",
    "build_local_spark",
    "local_spark",
    "register",
]
