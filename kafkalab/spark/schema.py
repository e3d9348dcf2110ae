"""The fixed schema of Spark's Kafka source, and its Arrow form.

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int [, headers array<struct<key string, value binary>>]

`timestampType` is Kafka's id: 0 CreateTime, 1 LogAppendTime, -1 none.
"""

from __future__ import annotations


def read_schema(include_headers: bool):
    """The source's schema as a pyspark StructType (every field nullable, as Spark's)."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


def arrow_schema(schema):
    """The Arrow schema Spark expects a Python data source's record batches to have
    for `schema` (it compares them exactly, nullability and list field names included)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")
