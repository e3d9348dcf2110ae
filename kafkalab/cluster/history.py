"""A history of what clients saw, and a checker for it (in the spirit of Jepsen's Kafka workload).

Producers record every send and its outcome, consumers record every read; after
the faults are healed, the final contents of each partition (read from the
leader) and, optionally, each replica's log are added. `check()` then gives a
verdict with evidence:

    lost          acknowledged, but not in the final log
    duplicated    one value at more than one offset in the final log
    reordered     a was acknowledged before b was sent, yet b sits before a; or
                  one consumer read an offset at or below one it had read before
    moved         acknowledged (or read) at one offset, found at another or not at all
                  (a read of something the final log does not hold at that offset)
    diverged      two replicas hold different bytes below the high watermark

Transactions add Jepsen's transactional anomalies, judged on what read_committed
readers saw (their reads, and the final log read with read_committed):

    aborted read               a read_committed reader returned a record whose
                               transaction aborted
    duplicated (read_committed)
                               one record at two offsets under read_committed; in an
                               exactly-once pipeline, one input record's output
                               (sends name their `source`) at two offsets
    lost                       also: a record of a committed transaction missing from
                               the read_committed final log; an input record of a
                               pipeline without any output there

Each transactional send names its transaction (`txn`), and the producer records
how the transaction ended: `commit`, `abort`, or `txn_fail` when the client does
not know (a commit that timed out, a producer that crashed: either may be true).

Values must be unique per partition (a producer counter does it; a pipeline's
retried output names its attempt, `b"out-7@txn-3"`). The recorder is
thread-safe: delivery callbacks and consumer threads may call it at once.

    history = History()
    history.send("t", 0, b"v1"); history.ack("t", 0, b"v1", offset=7)
    history.final_log("t", 0, [(0, b"v0"), ...])
    verdict = check(history)
    assert verdict.valid, verdict.summary()

    history.send("out", 0, b"o-7@t1", txn="t1", source=("in", 0, b"i-7"))
    history.commit("t1")                  # or history.abort("t1")
    history.read("out", 0, 3, b"o-7@t1", reader="c", isolation="read_committed")
    history.final_log("out", 0, [...], isolation="read_committed")
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from kafkalab.kinds import Kind
from kafkalab.records.record_batch import iter_headers, read_header

Partition = tuple[str, int]
Source = tuple[str, int, bytes]  # (topic, partition, value) of a pipeline's input record


class OpKind(Kind):
    """What an op of the history records."""

    SEND = "send"  # a producer sent a record
    ACK = "ack"  # ... and the broker acknowledged it at an offset
    FAIL = "fail"  # ... or the client gave up on it
    READ = "read"  # a consumer read a record at an offset
    COMMIT = "commit"  # a transaction committed
    ABORT = "abort"  # a transaction aborted
    TXN_FAIL = "txn_fail"  # a transaction's end is unknown (its commit failed)


class Isolation(Kind):
    """A consumer's isolation.level (the value librdkafka takes)."""

    READ_UNCOMMITTED = "read_uncommitted"
    READ_COMMITTED = "read_committed"


READ_COMMITTED = Isolation.READ_COMMITTED
READ_UNCOMMITTED = Isolation.READ_UNCOMMITTED


@dataclass
class Op:
    index: int  # position in the history: the real-time order the recorder saw
    kind: OpKind
    tp: Partition
    value: bytes
    offset: int = -1
    error: str = ""
    reader: str = ""  # which consumer read it (reads only)
    txn: str = ""  # the transaction of a send; the one a commit/abort/txn_fail ends
    source: Source | None = None  # the input record a pipeline's send was made from
    isolation: Isolation = READ_UNCOMMITTED  # reads only


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)
    finals: dict[Partition, list[tuple[int, bytes]]] = field(default_factory=dict)
    #: the final logs as a read_committed consumer reads them (aborted records left out)
    committed_finals: dict[Partition, list[tuple[int, bytes]]] = field(default_factory=dict)
    replicas: dict[Partition, dict[int, list[tuple[int, bytes]]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._counter = itertools.count()

    def _add(
        self,
        kind: OpKind,
        tp: Partition,
        value: bytes,
        offset: int = -1,
        error: str = "",
        reader: str = "",
        txn: str = "",
        source: Source | None = None,
        isolation: Isolation = READ_UNCOMMITTED,
    ) -> None:
        with self._lock:
            self.ops.append(
                Op(
                    next(self._counter),
                    kind,
                    tp,
                    bytes(value),
                    offset,
                    error,
                    reader,
                    txn,
                    source and (source[0], source[1], bytes(source[2])),
                    isolation,
                )
            )

    def send(
        self,
        topic: str,
        partition: int,
        value: bytes,
        txn: str = "",
        source: Source | None = None,
    ) -> None:
        """`txn` names the transaction the send belongs to (empty: none); `source` is
        the input record (topic, partition, value) a pipeline made this record from."""
        self._add(OpKind.SEND, (topic, partition), value, txn=txn, source=source)

    def ack(self, topic: str, partition: int, value: bytes, offset: int) -> None:
        self._add(OpKind.ACK, (topic, partition), value, offset)

    def fail(self, topic: str, partition: int, value: bytes, error: str) -> None:
        """The client gave up on the send: it may or may not be in the log."""
        self._add(OpKind.FAIL, (topic, partition), value, error=error)

    def commit(self, txn: str) -> None:
        """The transaction's commit was acknowledged."""
        self._add(OpKind.COMMIT, ("", -1), b"", txn=txn)

    def abort(self, txn: str) -> None:
        """The transaction was aborted (its abort acknowledged)."""
        self._add(OpKind.ABORT, ("", -1), b"", txn=txn)

    def txn_fail(self, txn: str, error: str) -> None:
        """The client does not know how the transaction ended (a commit that timed
        out, a producer that crashed or was fenced mid-commit): either outcome is fine."""
        self._add(OpKind.TXN_FAIL, ("", -1), b"", error=error, txn=txn)

    def read(
        self,
        topic: str,
        partition: int,
        offset: int,
        value: bytes,
        reader: str = "",
        isolation: str = READ_UNCOMMITTED,
    ) -> None:
        """`reader` names the consumer: one reader's reads must come in log order.
        `isolation` is the consumer's isolation.level: reads under read_committed are
        judged for aborted reads and duplicates."""
        level = Isolation.parse(isolation, "isolation level")
        self._add(OpKind.READ, (topic, partition), value, offset, reader=reader, isolation=level)

    def final_log(
        self,
        topic: str,
        partition: int,
        records: list[tuple[int, bytes]],
        isolation: str = READ_UNCOMMITTED,
    ) -> None:
        """(offset, value) of every record in the healed partition, in offset order;
        with `isolation="read_committed"`, what a read_committed consumer reads of it."""
        if Isolation.parse(isolation, "isolation level") == READ_COMMITTED:
            self.committed_finals[(topic, partition)] = list(records)
        else:
            self.finals[(topic, partition)] = list(records)

    def replica_batches(
        self, topic: str, partition: int, broker: int, batches: list[tuple[int, bytes]]
    ) -> None:
        """(base offset, raw batch bytes) of one replica's batches below its HW."""
        self.replicas.setdefault((topic, partition), {})[broker] = list(batches)


def read_replica_batches(partition_dir: Path, below: int) -> list[tuple[int, bytes]]:
    """(base offset, bytes) of every whole batch below offset `below` in a partition
    directory, read from its segment files."""
    out = []
    for log_path in sorted(partition_dir.glob("*.log")):
        data = log_path.read_bytes()
        for position, header in iter_headers(data):
            if header.last_offset < below:
                out.append((header.base_offset, data[position : position + header.size_in_bytes]))
    return out


@dataclass
class Verdict:
    valid: bool
    acknowledged: int
    lost: list[dict]
    duplicated: list[dict]
    reordered: list[dict]
    moved: list[dict]
    diverged: list[dict]
    #: read_committed reads of records whose transaction aborted
    aborted_read: list[dict] = field(default_factory=list)
    #: records (or a pipeline's input records' outputs) at two offsets under read_committed
    duplicated_committed: list[dict] = field(default_factory=list)

    def summary(self) -> str:
        lines = [
            f"{'valid' if self.valid else 'INVALID'}: {self.acknowledged} acknowledged; "
            f"{len(self.lost)} lost, {len(self.duplicated)} duplicated, "
            f"{len(self.reordered)} reordered, {len(self.moved)} moved, "
            f"{len(self.diverged)} diverged replica pairs, "
            f"{len(self.aborted_read)} aborted reads, "
            f"{len(self.duplicated_committed)} duplicated under read_committed"
        ]
        for name in (
            "lost",
            "duplicated",
            "reordered",
            "moved",
            "diverged",
            "aborted_read",
            "duplicated_committed",
        ):
            for item in getattr(self, name)[:5]:
                lines.append(f"  {name}: {item}")
        return "\n".join(lines)


def check(history: History) -> Verdict:
    """Judge a history: nothing acknowledged lost, duplicated, reordered or moved in
    the final logs, every consumer reading forward, replicas byte for byte alike, and
    (for read_committed readers) no aborted reads or duplicates."""
    acked, sent_at, reads = _outcomes(history)
    found = _LogAnomalies()
    for tp, final in history.finals.items():
        found.check_final_log(tp, final, acked[tp], sent_at, reads)
    found.reordered += _backward_reads(reads)
    diverged = _diverged_replicas(history.replicas)
    aborted_read, duplicated_committed = _transactional(history, acked, reads, found.lost)
    total = sum(len(v) for v in acked.values())
    return Verdict(
        valid=not (
            found.lost
            or found.duplicated
            or found.reordered
            or found.moved
            or diverged
            or aborted_read
            or duplicated_committed
        ),
        acknowledged=total,
        lost=found.lost,
        duplicated=found.duplicated,
        reordered=found.reordered,
        moved=found.moved,
        diverged=diverged,
        aborted_read=aborted_read,
        duplicated_committed=duplicated_committed,
    )


def _outcomes(
    history: History,
) -> tuple[dict[Partition, dict[bytes, Op]], dict[tuple[Partition, bytes], int], list[Op]]:
    """The acknowledged records by partition and value, when each value was first
    sent, and every read, from the history's ops."""
    acked: dict[Partition, dict[bytes, Op]] = defaultdict(dict)
    sent_at: dict[tuple[Partition, bytes], int] = {}
    reads: list[Op] = []
    for op in history.ops:
        if op.kind == OpKind.SEND:
            sent_at.setdefault((op.tp, op.value), op.index)
        elif op.kind == OpKind.ACK:
            acked[op.tp][op.value] = op
        elif op.kind == OpKind.READ:
            reads.append(op)
    return acked, sent_at, reads


@dataclass
class _LogAnomalies:
    """What the final logs show against the acknowledgements and reads."""

    lost: list[dict] = field(default_factory=list)
    duplicated: list[dict] = field(default_factory=list)
    reordered: list[dict] = field(default_factory=list)
    moved: list[dict] = field(default_factory=list)

    def check_final_log(
        self,
        tp: Partition,
        final: list[tuple[int, bytes]],
        acked: dict[bytes, Op],
        sent_at: dict[tuple[Partition, bytes], int],
        reads: list[Op],
    ) -> None:
        where: dict[bytes, list[int]] = defaultdict(list)
        at: dict[int, bytes] = {}
        for offset, value in final:
            where[value].append(offset)
            at[offset] = value
        for value, offsets in where.items():
            if len(offsets) > 1:
                self.duplicated.append({"partition": tp, "value": value, "offsets": offsets})
        for value, op in acked.items():
            if value not in where:
                self.lost.append(
                    {
                        "partition": tp,
                        "value": value,
                        "acked offset": op.offset,
                        "final log there": at.get(op.offset),
                    }
                )
            elif op.offset not in where[value]:
                self.moved.append(
                    {"partition": tp, "value": value, "acked at": op.offset, "now at": where[value]}
                )
        for op in reads:
            if op.tp == tp and at.get(op.offset) != op.value:
                self.moved.append(
                    {
                        "partition": tp,
                        "value": op.value,
                        "read at": op.offset,
                        "final log there": at.get(op.offset),
                    }
                )
        self._check_real_time_order(tp, where, acked, sent_at)

    def _check_real_time_order(
        self,
        tp: Partition,
        where: dict[bytes, list[int]],
        acked: dict[bytes, Op],
        sent_at: dict[tuple[Partition, bytes], int],
    ) -> None:
        """Acks sorted by when they came: every record sent after an ack must sit
        after the acknowledged record."""
        acks = sorted((op for op in acked.values() if op.value in where), key=lambda o: o.index)
        latest: tuple[int, bytes] | None = None  # (offset, value) of the highest acked so far
        events = sorted(
            [(op.index, OpKind.ACK, op.value) for op in acks]
            + [(sent_at[(tp, v)], OpKind.SEND, v) for v in where if (tp, v) in sent_at],
        )
        for _, kind, value in events:
            offset = where[value][0]
            if kind == OpKind.ACK:
                if latest is None or offset > latest[0]:
                    latest = (offset, value)
            elif latest is not None and offset < latest[0]:
                self.reordered.append(
                    {
                        "partition": tp,
                        "acknowledged first": latest[1],
                        "at": latest[0],
                        "sent later": value,
                        "yet at": offset,
                    }
                )


def _backward_reads(reads: list[Op]) -> list[dict]:
    """One consumer reads forward: each of its reads at a later offset than the last."""
    reordered = []
    last_read: dict[tuple[str, Partition], Op] = {}
    for op in reads:
        previous = last_read.get((op.reader, op.tp))
        if previous is not None and op.offset <= previous.offset:
            reordered.append(
                {
                    "partition": op.tp,
                    "reader": op.reader,
                    "read": op.value,
                    "at": op.offset,
                    "after reading offset": previous.offset,
                }
            )
        last_read[(op.reader, op.tp)] = op
    return reordered


def _diverged_replicas(
    replicas: dict[Partition, dict[int, list[tuple[int, bytes]]]],
) -> list[dict]:
    """Pairs of replicas whose batches differ below the smaller of their two ends."""
    diverged = []
    for tp, by_broker in replicas.items():
        brokers = sorted(by_broker)
        for a, b in itertools.combinations(brokers, 2):
            la, lb = dict(by_broker[a]), dict(by_broker[b])
            common = sorted(set(la) & set(lb))
            bad = [o for o in common if la[o] != lb[o]]
            # Below the smaller of the two, both must have the same batches.
            limit = min(_end(by_broker[a]), _end(by_broker[b]))
            missing = sorted(o for o in set(la) ^ set(lb) if o < limit)
            if bad or missing:
                diverged.append(
                    {
                        "partition": tp,
                        "brokers": (a, b),
                        "first differing batch": (bad or missing)[0],
                        "differing batches": len(bad) + len(missing),
                    }
                )
    return diverged


FINAL_READER = "final read (read_committed)"


def _transactional(
    history: History, acked: dict[Partition, dict[bytes, Op]], reads: list[Op], lost: list[dict]
) -> tuple[list[dict], list[dict]]:
    """Jepsen's transactional anomalies for read_committed readers: aborted reads and
    duplicates; adds committed records (and pipeline inputs) missing from the
    read_committed final logs to `lost`."""
    txns = _Transactions.of(history)
    seen = _read_committed(history, reads)
    aborted_read = _aborted_reads(seen, txns)
    duplicated_committed = _duplicated_committed(seen, txns)
    lost += _committed_missing(history, txns)
    lost += _inputs_without_output(history, acked, txns)
    return aborted_read, duplicated_committed


#: (partition, offset, value, reader) of a record a read_committed reader returned
_Seen = tuple[Partition, int, bytes, str]


@dataclass
class _Transactions:
    """The transactions of a history, and the pipeline inputs of its sends."""

    txn_of: dict[tuple[Partition, bytes], str] = field(default_factory=dict)
    source_of: dict[tuple[Partition, bytes], Source] = field(default_factory=dict)
    #: the sends of each transaction
    members: dict[str, list[Op]] = field(default_factory=lambda: defaultdict(list))
    outcome: dict[str, str] = field(default_factory=dict)  # commit | abort | unknown

    @classmethod
    def of(cls, history: History) -> _Transactions:
        txns = cls()
        for op in history.ops:
            if op.kind == OpKind.SEND:
                if op.txn:
                    txns.txn_of[(op.tp, op.value)] = op.txn
                    txns.members[op.txn].append(op)
                if op.source is not None:
                    txns.source_of[(op.tp, op.value)] = op.source
            elif op.kind in (OpKind.COMMIT, OpKind.ABORT):
                txns.outcome[op.txn] = op.kind
            elif op.kind == OpKind.TXN_FAIL:
                txns.outcome.setdefault(op.txn, "unknown")
        return txns


def _read_committed(history: History, reads: list[Op]) -> list[_Seen]:
    """Everything read_committed readers returned: their reads and the final read."""
    seen = [
        (op.tp, op.offset, op.value, op.reader or "?")
        for op in reads
        if op.isolation == READ_COMMITTED
    ]
    for tp, records in history.committed_finals.items():
        seen += [(tp, offset, value, FINAL_READER) for offset, value in records]
    return seen


def _aborted_reads(seen: list[_Seen], txns: _Transactions) -> list[dict]:
    aborted_read = []
    reported: set[tuple[Partition, int, str]] = set()
    for tp, offset, value, reader in seen:
        txn = txns.txn_of.get((tp, value))
        if txn and txns.outcome.get(txn) == OpKind.ABORT and (tp, offset, reader) not in reported:
            reported.add((tp, offset, reader))
            aborted_read.append(
                {
                    "partition": tp,
                    "value": value,
                    "offset": offset,
                    "reader": reader,
                    "transaction": txn,
                }
            )
    return aborted_read


def _duplicated_committed(seen: list[_Seen], txns: _Transactions) -> list[dict]:
    """One record, or one input's output, at more than one offset."""
    positions: dict[tuple, dict[tuple[Partition, int], bytes]] = defaultdict(dict)
    readers: dict[tuple, set[str]] = defaultdict(set)
    for tp, offset, value, reader in seen:
        source = txns.source_of.get((tp, value))
        key = ("input", source) if source is not None else ("record", tp, value)
        positions[key][(tp, offset)] = value
        readers[key].add(reader)
    duplicated_committed = []
    for key, where in positions.items():
        if len(where) > 1:
            item = {"input": key[1]} if key[0] == "input" else {"value": key[2]}
            item["at"] = sorted(where)
            item["values"] = [where[at] for at in sorted(where)]
            item["readers"] = sorted(readers[key])
            duplicated_committed.append(item)
    return duplicated_committed


def _committed_missing(history: History, txns: _Transactions) -> list[dict]:
    """Committed transactions whole in the read_committed final logs: the records
    missing there."""
    lost = []
    for tp, records in history.committed_finals.items():
        present = {value for _, value in records}
        for txn, sends in txns.members.items():
            if txns.outcome.get(txn) != OpKind.COMMIT:
                continue
            for op in sends:
                if op.tp == tp and op.value not in present:
                    lost.append(
                        {
                            "partition": tp,
                            "value": op.value,
                            "transaction": txn,
                            "committed, yet not in": "the read_committed final log",
                        }
                    )
    return lost


def _inputs_without_output(
    history: History, acked: dict[Partition, dict[bytes, Op]], txns: _Transactions
) -> list[dict]:
    """Every input of a pipeline has an output in the read_committed final logs, once
    every partition the pipeline wrote to has its read_committed final log."""
    source_of = txns.source_of
    outputs = {tp for tp, _ in source_of}
    if not outputs or not outputs <= set(history.committed_finals):
        return []
    made = {
        source_of[(tp, value)]
        for tp, records in history.committed_finals.items()
        for _, value in records
        if (tp, value) in source_of
    }
    lost = []
    for source_tp in sorted({(s[0], s[1]) for s in source_of.values()}):
        for value in acked[source_tp]:
            if (source_tp[0], source_tp[1], value) not in made:
                lost.append(
                    {
                        "input": (source_tp[0], source_tp[1], value),
                        "outputs": 0,
                        "not in": "the read_committed final log",
                    }
                )
    return lost


def _end(batches: list[tuple[int, bytes]]) -> int:
    """The offset after the last batch."""
    return read_header(batches[-1][1]).next_offset if batches else 0
