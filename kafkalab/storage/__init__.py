"""kafkalab.storage: Kafka's log on disk, in Kafka's byte format.

One Kafka concept a module, named after Kafka's class:

    unified_log.UnifiedLog        a partition's segmented log (Kafka: UnifiedLog / LocalLog / LogLoader)
    log_segment.LogSegment        one .log file with its .index, .timeindex (and .txnindex)
    file_records.FileRecords      a .log file or a byte range of one (what a fetch sends)
    offset_index.OffsetIndex      sparse offset -> file position index (8-byte entries)
    time_index.TimeIndex          sparse timestamp -> offset index (12-byte entries)
    transaction_index             .txnindex: aborted transactions of a segment (34-byte entries)
    producer_state_manager        idempotent producers and ongoing transactions (the LSO)
    checkpoint_file               recovery-point / log-start / replication offset checkpoints
    log_manager.LogManager        every log of a broker, retention, flush.ms, cleaning, clean shutdown
    log_cleaner.LogCleaner        log compaction (cleanup.policy=compact): latest record per key
    log_config.LogConfig          segment.bytes, retention.ms, ... with Kafka's defaults
    log_validator                 every record of a leader append checked, offsets and
                                  timestamps assigned, compression.type applied (Kafka: LogValidator)
    errors                        typed errors carrying Kafka's error codes
    dump_log_segments             `kafkalab dump-log` (kafka-dump-log.sh)
"""

from kafkalab.storage.errors import (
    CorruptIndexError,
    CorruptRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from kafkalab.storage.file_records import FileRecords
from kafkalab.storage.log_cleaner import CleanResult, LogCleaner, clean
from kafkalab.storage.log_config import InvalidConfigError, LogConfig
from kafkalab.storage.log_manager import LogManager
from kafkalab.storage.log_segment import FetchDataInfo, LogOffsetMetadata, LogSegment
from kafkalab.storage.offset_index import OffsetIndex, OffsetPosition
from kafkalab.storage.time_index import TimeIndex, TimestampOffset
from kafkalab.storage.transaction_index import AbortedTxn, TransactionIndex
from kafkalab.storage.unified_log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendOrigin,
    DeletedSegment,
    Log,
    LogAppendInfo,
    TimestampAndOffset,
    UnifiedLog,
)

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AbortedTxn",
    "AppendOrigin",
    "CleanResult",
    "CorruptIndexError",
    "CorruptRecordError",
    "DeletedSegment",
    "FetchDataInfo",
    "FileRecords",
    "InvalidConfigError",
    "KafkaStorageError",
    "Log",
    "LogAppendInfo",
    "LogCleaner",
    "LogConfig",
    "LogManager",
    "LogOffsetMetadata",
    "LogSegment",
    "OffsetIndex",
    "OffsetOutOfRangeError",
    "OffsetPosition",
    "RecordBatchTooLargeError",
    "StorageError",
    "TimeIndex",
    "TimestampAndOffset",
    "TimestampOffset",
    "TransactionIndex",
    "UnexpectedAppendOffsetError",
    "UnifiedLog",
    "clean",
]
