"""Typed storage errors, each with Kafka's error code and a message that says what to do.

Kafka's classes: org.apache.kafka.common.errors.* (the ones the log raises) and
org.apache.kafka.storage.internals.log.*Exception. The `error_code` is the number
the broker puts on the wire when the error reaches a client.
"""

from __future__ import annotations

from kafkalab.records.record_batch import CorruptRecordError, InvalidRecordError

__all__ = [
    "CompactedRecordWithoutKeyError",
    "CorruptIndexError",
    "CorruptRecordError",
    "IndexFullError",
    "InvalidOffsetError",
    "KafkaStorageError",
    "LogDirInUseError",
    "LogOffsetMetadataError",
    "OffsetOutOfRangeError",
    "RecordBatchTooLargeError",
    "StorageError",
    "UnexpectedAppendOffsetError",
]

# CorruptRecordError lives with the record format (kafkalab.records.record_batch);
# its wire code is CORRUPT_MESSAGE.
CorruptRecordError.error_code = 2  # type: ignore[attr-defined]


class StorageError(Exception):
    """Base of every error kafkalab.storage raises on purpose."""

    error_code: int = -1  # UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(StorageError):
    """A read asked for an offset outside [log start offset, log end offset].

    Kafka: OFFSET_OUT_OF_RANGE (1). A consumer resets by auto.offset.reset.
    """

    error_code = 1

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int, where: str = ""):
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        super().__init__(
            f"offset {offset} is out of range{' for ' + where if where else ''}: the log holds "
            f"[{log_start_offset}, {log_end_offset}); seek to an offset in that range "
            "(or let auto.offset.reset choose earliest/latest)"
        )


class CompactedRecordWithoutKeyError(InvalidRecordError):
    """A record without a key sent to a topic with cleanup.policy=compact, which
    keeps the latest record per key and so cannot keep it (Kafka:
    InvalidRecordException, "Compacted topic cannot accept message without key").

    Kafka: INVALID_RECORD (87). Give every record a key, or use cleanup.policy=delete.
    """

    error_code = 87


class RecordBatchTooLargeError(StorageError):
    """A batch is bigger than the topic's max.message.bytes or than a segment can hold.

    Kafka: MESSAGE_TOO_LARGE (10) / RECORD_LIST_TOO_LARGE (18).
    """

    error_code = 10


class UnexpectedAppendOffsetError(StorageError):
    """A follower-style append (offsets kept as given) was not monotonic.

    Kafka: UnexpectedAppendOffsetException; the replica fetcher truncates and
    retries. Batches appended with given offsets must start at or after the
    log end offset and have increasing offsets.
    """

    error_code = -1

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

    error_code = 56


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
