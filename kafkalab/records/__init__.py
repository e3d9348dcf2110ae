"""kafkalab.records: Kafka's record format (RecordBatch v2, magic 2), pure, no I/O.

record_batch     the 61-byte batch header: read, CRC-check, patch in place (hot path)
memory_records   build_batch / decode_batch / iter_batches / build_retained_batch (Kafka: MemoryRecordsBuilder)
record           Record and Header, one record's varint encoding (Kafka: DefaultRecord)
control_record   COMMIT / ABORT transaction markers (Kafka: EndTransactionMarker)
compression      gzip, snappy (xerial), lz4 (frame), zstd
varint           zigzag varints (Kafka: ByteUtils)
crc              CRC-32C
"""

from kafkalab.records.compression import CompressionError
from kafkalab.records.control_record import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_txn_marker_batch,
    parse_control_record,
)
from kafkalab.records.memory_records import (
    RecordBatch,
    SimpleRecord,
    build_batch,
    build_retained_batch,
    decode_batch,
    iter_batches,
)
from kafkalab.records.record import Header, Record
from kafkalab.records.record_batch import (
    BatchHeader,
    CompressionType,
    CorruptRecordError,
    InvalidRecordError,
    TimestampType,
    ensure_valid,
    read_header,
)

__all__ = [
    "BatchHeader",
    "CompressionError",
    "CompressionType",
    "ControlRecordType",
    "CorruptRecordError",
    "EndTransactionMarker",
    "Header",
    "InvalidRecordError",
    "Record",
    "RecordBatch",
    "SimpleRecord",
    "TimestampType",
    "build_batch",
    "build_retained_batch",
    "build_end_txn_marker_batch",
    "decode_batch",
    "ensure_valid",
    "iter_batches",
    "parse_control_record",
    "read_header",
]
