"""Typed storage errors, each with Kafka's error code and a message that says what to do.

Kafka's classes: org.apache.kafka.common.errors.* (the ones the log raises) and
org.apache.kafka.storage.internals.log.*Exception. Each is a KafkaError whose
`code` is what the broker puts on the wire when the error reaches a client.
"""

from __future__ import annotations

from typing import NamedTuple

from kafkalab.errors import Errors, KafkaErrorWithCode
from kafkalab.records.record_batch import CorruptRecordError, InvalidRecordError

__all__ = [
    "CompactedRecordWithoutKeyError",
    "ControlBatchFromClientError",
    "CorruptIndexError",
    "CorruptRecordError",
    "IndexFullError",
    "InvalidOffsetError",
    "InvalidTimestampError",
    "KafkaStorageError",
    "LogDirInUseError",
    "LogOffsetMetadataError",
    "OffsetOutOfRangeError",
    "RecordBatchTooLargeError",
    "RecordError",
    "RecordValidationError",
    "StorageError",
    "UnexpectedAppendOffsetError",
]

# CorruptRecordError lives with the record format (kafkalab.records.record_batch).


class StorageError(KafkaErrorWithCode):
    """Base of every error kafkalab.storage raises on purpose (UNKNOWN_SERVER_ERROR
    on the wire unless a subclass says otherwise)."""


class OffsetOutOfRangeError(StorageError):
    """A read asked for an offset outside [log start offset, log end offset].

    Kafka: OFFSET_OUT_OF_RANGE (1). A consumer resets by auto.offset.reset.
    """

    code = Errors.OFFSET_OUT_OF_RANGE

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int, where: str = ""):
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        super().__init__(
            f"offset {offset} is out of range{' for ' + where if where else ''}: the log holds "
            f"[{log_start_offset}, {log_end_offset}); seek to an offset in that range "
            "(or let auto.offset.reset choose earliest/latest)"
        )


class RecordError(NamedTuple):
    """One refused record (Kafka: ProduceResponse.RecordError): its index in its
    batch and why; a Produce v8+ response lists them as `record_errors`."""

    batch_index: int
    message: str


class RecordValidationError(InvalidRecordError):
    """Records inside a batch broke a rule of Kafka's LogValidator (a record not
    well formed, a key missing, a timestamp out of range): the batch is refused,
    and `record_errors` says which records and why.

    Kafka: INVALID_RECORD (87), RecordValidationException. Fix the producer (or
    the records) that wrote them; a correct client never sends them."""

    code = Errors.INVALID_RECORD

    def __init__(self, message: str, record_errors: list[RecordError] | None = None) -> None:
        super().__init__(message)
        self.record_errors = list(record_errors or [])


class InvalidTimestampError(RecordValidationError):
    """A record's timestamp is outside what the topic accepts
    (message.timestamp.before.max.ms / message.timestamp.after.max.ms), or a
    producer set the LogAppendTime type itself. Kafka: INVALID_TIMESTAMP (32)."""

    code = Errors.INVALID_TIMESTAMP


class CompactedRecordWithoutKeyError(RecordValidationError):
    """A record without a key sent to a topic with cleanup.policy=compact, which
    keeps the latest record per key and so cannot keep it (Kafka:
    InvalidRecordException, "Compacted topic cannot accept message without key").

    Kafka: INVALID_RECORD (87). Give every record a key, or use cleanup.policy=delete.
    """

    code = Errors.INVALID_RECORD


class RecordBatchTooLargeError(StorageError):
    """A batch is bigger than the topic's max.message.bytes or than a segment can hold.

    Kafka: MESSAGE_TOO_LARGE (10) / RECORD_LIST_TOO_LARGE (18).
    """

    code = Errors.MESSAGE_TOO_LARGE


class UnexpectedAppendOffsetError(StorageError):
    """A follower-style append (offsets kept as given) was not monotonic.

    Kafka: UnexpectedAppendOffsetException; the replica fetcher truncates and
    retries. Batches appended with given offsets must start at or after the
    log end offset and have increasing offsets.
    """

    def __init__(self, message: str, first_offset: int, last_offset: int):
        self.first_offset = first_offset
        self.last_offset = last_offset
        super().__init__(message)


class InvalidOffsetError(StorageError):
    """An index append would break the index's ordering (Kafka: InvalidOffsetException)."""


class IndexFullError(StorageError):
    """An index has no free slot; the segment must roll (Kafka: IllegalArgumentException
    'Attempt to append to a full index'). UnifiedLog rolls before this happens."""


class CorruptIndexError(StorageError):
    """An index file fails its sanity check (Kafka: CorruptIndexException).

    Recovery deletes the index file and rebuilds it from the log segment.
    """


class LogOffsetMetadataError(StorageError):
    """Internal: an offset's segment position could not be resolved."""


class KafkaStorageError(StorageError):
    """An I/O error on a log directory (Kafka: KAFKA_STORAGE_ERROR, 56).

    The directory is taken offline; check the disk and restart the broker.
    """

    code = Errors.KAFKA_STORAGE_ERROR


class LogDirInUseError(StorageError):
    """Another process holds the directory's `.lock` (Kafka refuses to start the same
    way). Stop the other broker or controller, or give this one its own directory."""

    def __init__(self, directory) -> None:
        super().__init__(
            f"Failed to acquire lock on file .lock in {directory}: another kafkalab "
            "broker or controller is using this directory. Stop it (`kafkalab cluster "
            "down --dir ...` for a cluster) or give this one its own directory."
        )
        self.directory = directory


class ControlBatchFromClientError(InvalidRecordError):
    """A client sent a control batch (a transaction marker). Kafka: INVALID_RECORD (87),
    "Clients are not allowed to write control records": markers are written by the
    transaction coordinator (WriteTxnMarkers), never produced."""

    code = Errors.INVALID_RECORD
