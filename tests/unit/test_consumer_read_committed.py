"""read_committed in the teaching consumer, over crafted Fetch responses: the records
of aborted transactions are dropped (by the response's aborted_transactions and the
ABORT markers), control records are never returned, read_uncommitted returns every
data record. Hypothesis interleaves several producers' transactions and checks the
consumer against a model of what committed."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from kafkalab.client.aborted_transactions import AbortedTransactions
from kafkalab.client.consumer import KafkaConsumer, TopicPartition
from kafkalab.records import SimpleRecord, build_batch, iter_batches
from kafkalab.records.control_record import ControlRecordType, build_end_txn_marker_batch

TP = TopicPartition("t", 0)


class PartitionLog:
    """Batches as a leader would hold them, and the aborted transactions a
    read_committed Fetch returns with them: (producer id, first offset)."""

    def __init__(self) -> None:
        self.data = b""
        self.next = 0
        self.open: dict[int, int] = {}  # producer id -> first offset of its transaction
        self.aborted: list[tuple[int, int]] = []

    def write(self, values: list[bytes], producer_id: int = -1) -> None:
        transactional = producer_id >= 0
        if transactional:
            self.open.setdefault(producer_id, self.next)
        self.data += build_batch(
            [SimpleRecord(v, timestamp=0) for v in values],
            base_offset=self.next,
            producer_id=producer_id,
            producer_epoch=0 if transactional else -1,
            is_transactional=transactional,
        )
        self.next += len(values)

    def end(self, producer_id: int, committed: bool) -> None:
        first = self.open.pop(producer_id, None)
        if first is not None and not committed:
            self.aborted.append((producer_id, first))
        marker = ControlRecordType.COMMIT if committed else ControlRecordType.ABORT
        self.data += build_end_txn_marker_batch(
            producer_id, 0, marker, 0, base_offset=self.next, timestamp=0
        )
        self.next += 1

    def response(self) -> dict:
        return {
            "responses": [
                {
                    "topic": TP.topic,
                    "partitions": [
                        {
                            "partition_index": TP.partition,
                            "error_code": 0,
                            "high_watermark": self.next,
                            "last_stable_offset": self.next,
                            "aborted_transactions": [
                                {"producer_id": p, "first_offset": f} for p, f in self.aborted
                            ],
                            "records": self.data,
                        }
                    ],
                }
            ]
        }


def consume(log: PartitionLog, isolation: str, position: int = 0) -> list[bytes]:
    c = KafkaConsumer({"bootstrap.servers": "127.0.0.1:1", "isolation.level": isolation})
    c.positions[TP] = position
    c._parse(log.response())
    assert c._fetch_offsets[TP] == log.next  # the position moves past markers and drops
    return [r.value for r in c._buffer]


def test_aborted_records_and_markers_are_not_returned():
    log = PartitionLog()
    log.write([b"plain-1"])
    log.write([b"a-1", b"a-2"], producer_id=7)
    log.write([b"b-1"], producer_id=8)
    log.write([b"a-3"], producer_id=7)
    log.end(7, committed=False)
    log.write([b"plain-2"])
    log.end(8, committed=True)
    log.write([b"a-4"], producer_id=7)  # producer 7's next transaction commits
    log.end(7, committed=True)
    assert consume(log, "read_committed") == [b"plain-1", b"b-1", b"plain-2", b"a-4"]
    assert consume(log, "read_uncommitted") == [
        b"plain-1",
        b"a-1",
        b"a-2",
        b"b-1",
        b"a-3",
        b"plain-2",
        b"a-4",
    ]


def test_fetching_from_the_middle_of_an_aborted_transaction():
    log = PartitionLog()
    log.write([b"a-1"], producer_id=7)
    log.write([b"a-2"], producer_id=7)
    log.end(7, committed=False)
    log.write([b"after"])
    assert consume(log, "read_committed", position=1) == [b"after"]


def test_an_unknown_isolation_level_is_refused():
    with pytest.raises(ValueError, match="read_committed"):
        KafkaConsumer({"bootstrap.servers": "127.0.0.1:1", "isolation.level": "committed"})


def test_the_filter_alone_keeps_non_transactional_batches_of_an_aborting_producer():
    log = PartitionLog()
    log.write([b"x"], producer_id=7)
    log.end(7, committed=False)
    f = AbortedTransactions(log.aborted)
    kept = [f.keep(b) for b in iter_batches(log.data)]
    assert kept == [False, False] and f.aborting == set()


STEPS = st.lists(
    st.tuples(st.sampled_from(["write", "end"]), st.sampled_from([-1, 1, 2, 3]), st.booleans()),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(STEPS)
def test_read_committed_returns_exactly_what_committed(steps):
    log = PartitionLog()
    pending: dict[int, list[bytes]] = {}
    committed: list[bytes] = []
    everything: list[bytes] = []
    for i, (kind, producer_id, flag) in enumerate(steps):
        if kind == "write" or producer_id < 0:
            value = b"%d" % i
            log.write([value], producer_id)
            everything.append(value)
            if producer_id < 0:
                committed.append(value)
            else:
                pending.setdefault(producer_id, []).append(value)
        elif producer_id in log.open:
            log.end(producer_id, committed=flag)
            if flag:
                committed.extend(pending.pop(producer_id))
            else:
                pending.pop(producer_id)
    for producer_id in list(log.open):  # the LSO: end what is open before reading
        log.end(producer_id, committed=False)
        pending.pop(producer_id)
    if not log.data:
        return
    got = consume(log, "read_committed")
    assert got == [v for v in everything if v in set(committed)]  # in log order
    assert consume(log, "read_uncommitted") == everything


def test_the_position_moves_past_markers_and_aborted_batches():
    log = PartitionLog()
    log.write([b"kept"])
    log.write([b"x"], producer_id=7)
    log.end(7, committed=False)
    c = KafkaConsumer({"bootstrap.servers": "127.0.0.1:1", "isolation.level": "read_committed"})
    c._send_fetches = lambda: None  # no broker here: the response is handed in
    c.positions[TP] = 0
    c._parse(log.response())
    assert [r.value for r in c.poll(0)] == [b"kept"]
    assert c.position(TP) == log.next == 3  # not 1: the end of the partition is reached
    nothing = PartitionLog()
    nothing.write([b"y"], producer_id=8)
    nothing.end(8, committed=False)
    c.positions[TP] = 0
    c._fetch_offsets.pop(TP, None)
    c._parse(nothing.response())
    assert c.position(TP) == 2 and c._buffer == []
