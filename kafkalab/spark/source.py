"""`kafkalab`: a PySpark Python data source with the options, schema and semantics
of Spark's built-in Kafka source and sink, reading with kafkalab's own Fetch (or
librdkafka) and writing with librdkafka.

    spark.dataSource.register(KafkaDataSource)
    df = (spark.read.format("kafkalab")
          .option("kafka.bootstrap.servers", bs).option("subscribe", "t").load())
    df.selectExpr("CAST(key AS STRING)", "value").write.format("kafkalab") \\
        .option("kafka.bootstrap.servers", bs).option("topic", "out").mode("append").save()

Where each piece runs: `schema()` when the DataFrame is defined (`load()`),
`reader()` / `streamReader()` / `writer()` while Spark plans the query (on the
driver), and `read()` / `write()` in Spark's Python workers on the executors.
Option errors are raised in the first two, before any job runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)

from kafkalab.spark.errors import KafkaSourceOptionError
from kafkalab.spark.kafka_io import DriverOffsets, check_data_loss, produce_batches, read_range
from kafkalab.spark.offsets import (
    OffsetRange,
    PartitionOffsets,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    rate_limit,
)
from kafkalab.spark.options import (
    ReadOptions,
    WriteOptions,
    parse_read_options,
    parse_write_options,
)
from kafkalab.spark.schema import read_schema

try:  # Spark >= 4.1: the stream sink gets Arrow batches too
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
except ImportError:  # pragma: no cover - Spark 4.0
    from pyspark.sql.datasource import DataSourceStreamWriter as _StreamWriterBase

try:  # Spark >= 4.2: admission control (maxOffsetsPerTrigger) and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - Spark 4.0 / 4.1

    class ReadLimit:  # type: ignore[no-redef]
        pass

    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        pass

    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        def __init__(self, max_rows: int) -> None:
            self.max_rows = max_rows

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass


class KafkaInputPartition(InputPartition):
    """One Spark task: one offset range of one topic partition."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.range = offset_range


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    records: int


class KafkaDataSource(DataSource):
    """Spark's Kafka source and sink, as a Python data source named `kafkalab`."""

    @classmethod
    def name(cls) -> str:
        return "kafkalab"

    def schema(self):
        opts = parse_read_options(self.options, streaming=None)  # fail at load(), not later
        return read_schema(opts.include_headers)

    def _read_options(self, schema, streaming: bool) -> ReadOptions:
        opts = parse_read_options(self.options, streaming=streaming)
        expected = read_schema(opts.include_headers)
        if schema is not None and schema != expected:
            raise KafkaSourceOptionError(
                "The Kafka source has a fixed schema and cannot be set with a custom one: "
                f"drop .schema(...). Its schema is {expected.simpleString()}"
            )
        return opts

    def reader(self, schema) -> DataSourceReader:
        return KafkaBatchReader(self._read_options(schema, streaming=False), schema)

    def streamReader(self, schema) -> DataSourceStreamReader:
        return KafkaStreamReader(self._read_options(schema, streaming=True), schema)

    def writer(self, schema, overwrite: bool) -> KafkaBatchWriter:
        if overwrite:
            raise KafkaSourceOptionError(
                "Save mode 'overwrite' is not allowed for Kafka: a topic is appended to. Use "
                "mode('append')."
            )
        return KafkaBatchWriter(_write_options(self.options, schema))

    def streamWriter(self, schema, overwrite: bool) -> KafkaStreamWriter:
        return KafkaStreamWriter(_write_options(self.options, schema))


def _write_options(options, schema) -> WriteOptions:
    """Check the sink's options and the DataFrame's columns, as Spark's Kafka sink does."""
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

    opts = parse_write_options(options)
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise KafkaSourceOptionError(
            "Required attribute 'value' not found: the DataFrame written to Kafka needs a "
            "'value' column (string or binary)."
        )
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], StringType | BinaryType):
            raise KafkaSourceOptionError(
                f"{name.capitalize()} attribute type must be a string or binary, not "
                f"{fields[name].simpleString()}: CAST it first."
            )
    if opts.topic is None:
        if "topic" not in fields:
            raise KafkaSourceOptionError(
                "Topic option required when no 'topic' attribute is present. Use the 'topic' "
                "option for setting a topic."
            )
        if not isinstance(fields["topic"], StringType):
            raise KafkaSourceOptionError(
                f"Topic type must be a string, not {fields['topic'].simpleString()}"
            )
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise KafkaSourceOptionError(
            f"Partition type must be int, not {fields['partition'].simpleString()}"
        )
    if "headers" in fields:
        h = fields["headers"]
        ok = (
            isinstance(h, ArrayType)
            and isinstance(h.elementType, StructType)
            and [f.name for f in h.elementType.fields] == ["key", "value"]
            and isinstance(h.elementType.fields[0].dataType, StringType)
            and isinstance(h.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise KafkaSourceOptionError(
                "Headers attribute type must be array<struct<key:string,value:binary>>, not "
                f"{h.simpleString()}"
            )
    return opts


class KafkaBatchReader(DataSourceReader):
    """Offsets are resolved when Spark plans the read (earliest/latest/timestamps
    become numbers then), and each task reads one planned range."""

    def __init__(self, opts: ReadOptions, schema) -> None:
        self.opts, self.schema = opts, schema
        driver = DriverOffsets(opts)
        try:
            tps = driver.partitions()
            marks = driver.watermarks(tps)
            start = driver.resolve(
                opts.starting, tps, marks, starting=True, option="startingOffsets"
            )
            end = driver.resolve(opts.ending, tps, marks, starting=False, option="endingOffsets")
        finally:
            driver.close()
        ranges = []
        for tp in tps:
            if start[tp] > end[tp]:
                raise KafkaSourceOptionError(
                    f"Starting offset {start[tp]} of {tp[0]}-{tp[1]} is after its ending offset "
                    f"{end[tp]}; check startingOffsets and endingOffsets."
                )
            ranges.append(OffsetRange(tp[0], tp[1], start[tp], end[tp]))
        self.ranges = plan_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)

    def partitions(self) -> list[InputPartition]:
        return [KafkaInputPartition(r) for r in self.ranges]

    def read(self, partition: InputPartition) -> Iterator:
        if isinstance(partition, KafkaInputPartition):
            yield from read_range(self.opts, partition.range, self.schema)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over offsets `{topic: {"partition": offset}}`.

    The reader on the driver lives as long as the query; Spark pickles a copy of
    it to the executors for `read()`, without the driver's consumer."""

    def __init__(self, opts: ReadOptions, schema) -> None:
        self.opts, self.schema = opts, schema
        self._driver: DriverOffsets | None = None
        self._latest: PartitionOffsets | None = None
        self._target: PartitionOffsets | None = None  # Trigger.AvailableNow's end

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_driver"] = None
        return state

    @property
    def driver(self) -> DriverOffsets:
        if self._driver is None:
            self._driver = DriverOffsets(self.opts)
        return self._driver

    def _now(self) -> tuple[PartitionOffsets, PartitionOffsets]:
        """(earliest, latest) of every partition the subscription covers now."""
        tps = self.driver.partitions()
        marks = self.driver.watermarks(tps)
        return {tp: m[0] for tp, m in marks.items()}, {tp: m[1] for tp, m in marks.items()}

    def initialOffset(self) -> dict:
        tps = self.driver.partitions()
        marks = self.driver.watermarks(tps)
        start = self.driver.resolve(
            self.opts.starting, tps, marks, starting=True, option="startingOffsets"
        )
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._now()[1]

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        earliest, latest = self._now()
        self._latest = dict(latest)
        begin = offsets_from_json(start) if start is not None else dict(latest)
        for tp in sorted(set(begin) - set(latest)):
            check_data_loss(
                f"Partition {tp[0]}-{tp[1]} is gone (deleted topic?) while the query still "
                f"had to read it from offset {begin[tp]}.",
                self.opts.fail_on_data_loss,
            )
        # A partition that appeared since `start` is read from its earliest offset.
        begin = {tp: begin.get(tp, earliest[tp]) for tp in latest}
        end = dict(latest)
        if self._target is not None:  # Trigger.AvailableNow: nothing past the target
            end = {tp: min(off, self._target.get(tp, begin[tp])) for tp, off in end.items()}
        if limit is None:
            limit = self.getDefaultReadLimit()
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, end, limit.max_rows)
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else offsets_to_json(self._latest)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        s, e = offsets_from_json(start), offsets_from_json(end)
        new = [tp for tp in e if tp not in s]
        earliest = {tp: m[0] for tp, m in self.driver.watermarks(new).items()} if new else {}
        ranges = []
        for tp, until in sorted(e.items()):
            begin = s.get(tp, earliest.get(tp, 0))
            if until < begin:
                check_data_loss(
                    f"Partition {tp[0]}-{tp[1]}'s offset went back from {begin} to {until}.",
                    self.opts.fail_on_data_loss,
                )
                continue
            ranges.append(OffsetRange(tp[0], tp[1], begin, until))
        planned = plan_ranges(ranges, self.opts.min_partitions, self.opts.max_records_per_partition)
        return [KafkaInputPartition(r) for r in planned]

    def read(self, partition: InputPartition) -> Iterator:
        if isinstance(partition, KafkaInputPartition):
            # The worker keeps its consumer for the next micro-batch's tasks.
            yield from read_range(self.opts, partition.range, self.schema, reuse=True)

    def commit(self, end: dict) -> None:
        """Spark's Kafka source commits nothing to Kafka: the checkpoint holds the offsets."""

    def stop(self) -> None:
        if self._driver is not None:
            self._driver.close()
            self._driver = None


class KafkaBatchWriter(DataSourceArrowWriter):
    """Each task produces its Arrow batches and waits for every acknowledgement."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator) -> KafkaCommitMessage:
        return KafkaCommitMessage(produce_batches(self.opts, _arrow(iterator)))


class KafkaStreamWriter(_StreamWriterBase):
    """Each micro-batch's tasks produce their rows (at least once, as Spark's sink)."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator) -> KafkaCommitMessage:
        return KafkaCommitMessage(produce_batches(self.opts, _arrow(iterator)))

    def commit(self, messages, batchId: int) -> None:
        """Nothing to do: every record was acknowledged before its task ended."""

    def abort(self, messages, batchId: int) -> None:
        """Nothing to undo: what was acknowledged stays (at-least-once)."""


def _arrow(items, rows_per_batch: int = 10_000) -> Iterator:
    """Arrow record batches from what the writer gets: batches as they are, or (Spark
    4.0's row-based stream writer) Rows gathered into batches."""
    import pyarrow as pa

    chunk: list[dict] = []
    for item in items:
        if isinstance(item, pa.RecordBatch):
            yield item
            continue
        chunk.append(item.asDict(recursive=True))
        if len(chunk) >= rows_per_batch:
            yield pa.RecordBatch.from_pylist(chunk)
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk)
