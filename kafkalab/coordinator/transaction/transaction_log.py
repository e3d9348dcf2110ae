"""The records of `__transaction_state`, byte for byte as Kafka writes them.

Kafka's classes: kafka.coordinator.transaction.TransactionLog (keyToBytes,
valueToBytes, readTxnRecordKey, readTxnRecordValue) and, since 4.0,
org.apache.kafka.coordinator.transaction.TransactionLog; schemas in
transaction-coordinator/src/main/resources/common/message/
{TransactionLogKey,TransactionLogValue}.json.

    key    int16 version 0, then   transactional_id string
    value  int16 version 0, then   producer_id int64, producer_epoch int16,
                                   transaction_timeout_ms int32,
                                   transaction_status int8 (the state's id below),
                                   transaction_partitions nullable
                                       [topic string, partition_ids [int32]],
                                   transaction_last_update_timestamp_ms int64,
                                   transaction_start_timestamp_ms int64

Value version 1 is the same fields, flexible (tagged fields, compact strings),
with three tagged fields (KIP-890 part 2):

    tag 0  previous_producer_id        int64, default -1
    tag 1  next_producer_id            int64, default -1
    tag 2  client_transaction_version  int16, default 0

`client_transaction_version` is the transaction version the client's request
spoke (2: EndTxn v5+, or a partition added by a leader for a Produce v12+);
`next_producer_id` is set in a Prepare* of transactions v2 whose bumped epoch
reached Short.MAX_VALUE: the producer id the Complete* record moves to, with
epoch 0; `previous_producer_id` names the producer id a record moved away from.
Kafka writes version 1 from `transaction.version` 1 on and sets
PreviousProducerId to the id before every transition; kafkalab writes version 1
only when a tagged field is not at its default and sets previous_producer_id
only when the producer id changes (the overflow's Complete*, a rotation), so a
transaction version 1 client's records stay the version 0 bytes they were, and
both versions are read. A null value is a tombstone: the transactional id expired
(transactional.id.expiration.ms) and compaction forgets it. An Empty state is
written with null partitions, as Kafka does.

`transaction_status` is the state's id (Kafka's TransactionState.id, here
`TxnState.id`): Empty 0, Ongoing 1, PrepareCommit 2, PrepareAbort 3,
CompleteCommit 4, CompleteAbort 5, Dead 6, PrepareEpochFence 7.

A transactional id lives on partition abs(Java `String.hashCode`) %
transaction.state.log.num.partitions, as a group does on __consumer_offsets.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkalab.coordinator.group.coordinator_records import java_string_hash, kafka_abs
from kafkalab.coordinator.transaction.transaction_state import TxnState
from kafkalab.protocol.schema import Field as F
from kafkalab.protocol.schema import Message
from kafkalab.protocol.types import (
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    ArrayOf,
    ProtocolError,
    Reader,
    Writer,
)

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0
_HIGHEST_VALUE_VERSION = 1
_I16 = struct.Struct(">h")

#: Kafka's TransactionState ids, by state (a TxnState is its name: STATE_IDS["Ongoing"] is 1)
STATE_IDS: dict[TxnState, int] = {state: state.id for state in TxnState}
STATE_NAMES: dict[int, TxnState] = {state.id: state for state in TxnState}

TRANSACTION_LOG_KEY = Message(-1, "TransactionLogKey", [F("transactional_id", STRING)])
TRANSACTION_LOG_VALUE = Message(
    -1,
    "TransactionLogValue",
    [
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("transaction_timeout_ms", INT32),
        F("transaction_status", INT8),
        F(
            "transaction_partitions",
            [F("topic", STRING), F("partition_ids", ArrayOf(INT32))],
            nullable="0+",
        ),
        F("transaction_last_update_timestamp_ms", INT64),
        F("transaction_start_timestamp_ms", INT64),
    ],
    flexible_from=1,
)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class TransactionLogValue:
    """What __transaction_state holds for one transactional id."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", TxnState(self.state))  # "Ongoing" is Ongoing


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The __transaction_state partition of `transactional_id` (its leader is the
    transaction coordinator of that id)."""
    return kafka_abs(java_string_hash(transactional_id)) % num_partitions


def transaction_log_key(transactional_id: str) -> bytes:
    w = Writer()
    w.buf += _I16.pack(KEY_VERSION)
    TRANSACTION_LOG_KEY.encode({"transactional_id": transactional_id}, 0, w)
    return w.getvalue()


def read_key(data: bytes | bytearray | memoryview) -> str:
    """The transactional id a __transaction_state key names."""
    r = Reader(data)
    version = r._unpack(_I16)
    if version != KEY_VERSION:
        raise ProtocolError(f"TransactionLogKey version {version}; only 0 exists")
    return TRANSACTION_LOG_KEY.decode(r, 0)["transactional_id"]


_I64 = struct.Struct(">q")
TAG_PREVIOUS_PRODUCER_ID, TAG_NEXT_PRODUCER_ID, TAG_CLIENT_TRANSACTION_VERSION = 0, 1, 2


def _tagged(v: TransactionLogValue) -> dict[int, bytes]:
    """The tagged fields that differ from their defaults (Kafka omits the others)."""
    out: dict[int, bytes] = {}
    if v.previous_producer_id != -1:
        out[TAG_PREVIOUS_PRODUCER_ID] = _I64.pack(v.previous_producer_id)
    if v.next_producer_id != -1:
        out[TAG_NEXT_PRODUCER_ID] = _I64.pack(v.next_producer_id)
    if v.client_transaction_version != 0:
        out[TAG_CLIENT_TRANSACTION_VERSION] = _I16.pack(v.client_transaction_version)
    return out


def transaction_log_value(v: TransactionLogValue, version: int | None = None) -> bytes:
    """The value bytes: version 1 if a tagged field is set (or `version` says so),
    else version 0."""
    tagged = _tagged(v)
    if version is None:
        version = 1 if tagged else VALUE_VERSION
    if tagged and version < 1:
        raise ValueError("version 0 of TransactionLogValue has no tagged fields")
    if v.state == TxnState.EMPTY and v.partitions:
        raise ValueError("an Empty transaction has no partitions")
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(v.partitions):
        by_topic.setdefault(topic, []).append(partition)
    w = Writer()
    w.buf += _I16.pack(version)
    TRANSACTION_LOG_VALUE.encode(
        {
            "producer_id": v.producer_id,
            "producer_epoch": v.producer_epoch,
            "transaction_timeout_ms": v.transaction_timeout_ms,
            "transaction_status": STATE_IDS[v.state],
            "transaction_partitions": None
            if v.state == TxnState.EMPTY
            else [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()],
            "transaction_last_update_timestamp_ms": v.last_update_timestamp_ms,
            "transaction_start_timestamp_ms": v.start_timestamp_ms,
            "_tagged": tagged,
        },
        version,
        w,
    )
    return w.getvalue()


def read_value(data: bytes | bytearray | memoryview) -> TransactionLogValue:
    r = Reader(data)
    version = r._unpack(_I16)
    if not 0 <= version <= _HIGHEST_VALUE_VERSION:
        raise ProtocolError(
            f"TransactionLogValue version {version} is not one of 0-{_HIGHEST_VALUE_VERSION}"
        )
    d = TRANSACTION_LOG_VALUE.decode(r, version)
    status = d["transaction_status"]
    if status not in STATE_NAMES:
        raise ProtocolError(f"TransactionLogValue with unknown transaction status {status}")
    tagged = d.get("_tagged", {})

    def tag(number: int, codec: struct.Struct, default: int) -> int:
        raw = tagged.get(number)
        if raw is None:
            return default
        if len(raw) != codec.size:
            raise ProtocolError(f"TransactionLogValue tag {number} has {len(raw)} bytes")
        return codec.unpack(raw)[0]

    return TransactionLogValue(
        producer_id=d["producer_id"],
        producer_epoch=d["producer_epoch"],
        transaction_timeout_ms=d["transaction_timeout_ms"],
        state=STATE_NAMES[status],
        partitions=frozenset(
            (t["topic"], p) for t in d["transaction_partitions"] or () for p in t["partition_ids"]
        ),
        last_update_timestamp_ms=d["transaction_last_update_timestamp_ms"],
        start_timestamp_ms=d["transaction_start_timestamp_ms"],
        previous_producer_id=tag(TAG_PREVIOUS_PRODUCER_ID, _I64, -1),
        next_producer_id=tag(TAG_NEXT_PRODUCER_ID, _I64, -1),
        client_transaction_version=tag(TAG_CLIENT_TRANSACTION_VERSION, _I16, 0),
    )


def describe_record(key: bytes | None, value: bytes | None) -> str:
    """One line per record, for `kafkalab dump-log --transaction-log-decoder` (the
    shape of Kafka's TransactionLogMessageFormatter)."""
    if key is None:
        return "key: null (not a transaction log record)"
    head = f"transaction_metadata::transactionalId={read_key(key)}"
    if value is None:
        return head + " :: <DELETE>"
    v = read_value(value)
    partitions = ",".join(f"{t}-{p}" for t, p in sorted(v.partitions))
    return (
        f"{head} :: producerId={v.producer_id},producerEpoch={v.producer_epoch},"
        f"state={v.state},partitions=[{partitions}],"
        f"txnLastUpdateTimestamp={v.last_update_timestamp_ms},"
        f"txnTimeoutMs={v.transaction_timeout_ms}"
        + (f",nextProducerId={v.next_producer_id}" if v.next_producer_id != -1 else "")
        + (
            f",clientTransactionVersion={v.client_transaction_version}"
            if v.client_transaction_version
            else ""
        )
    )
