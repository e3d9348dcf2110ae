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

Values must be unique per partition (a producer counter does it). The recorder
is thread-safe: delivery callbacks and consumer threads may call it at once.

    history = History()
    history.send("t", 0, b"v1"); history.ack("t", 0, b"v1", offset=7)
    history.final_log("t", 0, [(0, b"v0"), ...])
    verdict = check(history)
    assert verdict.valid, verdict.summary()
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from kafkalab.records.record_batch import iter_headers, read_header

Partition = tuple[str, int]


@dataclass
class Op:
    index: int  # position in the history: the real-time order the recorder saw
    kind: str  # send | ack | fail | read
    tp: Partition
    value: bytes
    offset: int = -1
    error: str = ""
    reader: str = ""  # which consumer read it (reads only)


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)
    finals: dict[Partition, list[tuple[int, bytes]]] = field(default_factory=dict)
    replicas: dict[Partition, dict[int, list[tuple[int, bytes]]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._counter = itertools.count()

    def _add(
        self,
        kind: str,
        tp: Partition,
        value: bytes,
        offset: int = -1,
        error: str = "",
        reader: str = "",
    ) -> None:
        with self._lock:
            self.ops.append(Op(next(self._counter), kind, tp, bytes(value), offset, error, reader))

    def send(self, topic: str, partition: int, value: bytes) -> None:
        self._add("send", (topic, partition), value)

    def ack(self, topic: str, partition: int, value: bytes, offset: int) -> None:
        self._add("ack", (topic, partition), value, offset)

    def fail(self, topic: str, partition: int, value: bytes, error: str) -> None:
        """The client gave up on the send: it may or may not be in the log."""
        self._add("fail", (topic, partition), value, error=error)

    def read(self, topic: str, partition: int, offset: int, value: bytes, reader: str = "") -> None:
        """`reader` names the consumer: one reader's reads must come in log order."""
        self._add("read", (topic, partition), value, offset, reader=reader)

    def final_log(self, topic: str, partition: int, records: list[tuple[int, bytes]]) -> None:
        """(offset, value) of every record in the healed partition, in offset order."""
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

    def summary(self) -> str:
        lines = [
            f"{'valid' if self.valid else 'INVALID'}: {self.acknowledged} acknowledged; "
            f"{len(self.lost)} lost, {len(self.duplicated)} duplicated, "
            f"{len(self.reordered)} reordered, {len(self.moved)} moved, "
            f"{len(self.diverged)} diverged replica pairs"
        ]
        for name in ("lost", "duplicated", "reordered", "moved", "diverged"):
            for item in getattr(self, name)[:5]:
                lines.append(f"  {name}: {item}")
        return "\n".join(lines)


def check(history: History) -> Verdict:
    acked: dict[Partition, dict[bytes, Op]] = defaultdict(dict)
    sent_at: dict[tuple[Partition, bytes], int] = {}
    reads: list[Op] = []
    for op in history.ops:
        if op.kind == "send":
            sent_at.setdefault((op.tp, op.value), op.index)
        elif op.kind == "ack":
            acked[op.tp][op.value] = op
        elif op.kind == "read":
            reads.append(op)
    lost, duplicated, reordered, moved = [], [], [], []
    for tp, final in history.finals.items():
        where: dict[bytes, list[int]] = defaultdict(list)
        at: dict[int, bytes] = {}
        for offset, value in final:
            where[value].append(offset)
            at[offset] = value
        for value, offsets in where.items():
            if len(offsets) > 1:
                duplicated.append({"partition": tp, "value": value, "offsets": offsets})
        for value, op in acked[tp].items():
            if value not in where:
                lost.append(
                    {
                        "partition": tp,
                        "value": value,
                        "acked offset": op.offset,
                        "final log there": at.get(op.offset),
                    }
                )
            elif op.offset not in where[value]:
                moved.append(
                    {"partition": tp, "value": value, "acked at": op.offset, "now at": where[value]}
                )
        for op in reads:
            if op.tp == tp and at.get(op.offset) != op.value:
                moved.append(
                    {
                        "partition": tp,
                        "value": op.value,
                        "read at": op.offset,
                        "final log there": at.get(op.offset),
                    }
                )
        # Real-time order: acks sorted by when they came; every record sent after
        # an ack must sit after the acknowledged record.
        acks = sorted((op for op in acked[tp].values() if op.value in where), key=lambda o: o.index)
        latest: tuple[int, bytes] | None = None  # (offset, value) of the highest acked so far
        events = sorted(
            [(op.index, "ack", op.value) for op in acks]
            + [(sent_at[(tp, v)], "send", v) for v in where if (tp, v) in sent_at],
        )
        for _, kind, value in events:
            offset = where[value][0]
            if kind == "ack":
                if latest is None or offset > latest[0]:
                    latest = (offset, value)
            elif latest is not None and offset < latest[0]:
                reordered.append(
                    {
                        "partition": tp,
                        "acknowledged first": latest[1],
                        "at": latest[0],
                        "sent later": value,
                        "yet at": offset,
                    }
                )
    # One consumer reads forward: each of its reads at a later offset than the last.
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
    diverged = []
    for tp, by_broker in history.replicas.items():
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
    total = sum(len(v) for v in acked.values())
    return Verdict(
        valid=not (lost or duplicated or reordered or moved or diverged),
        acknowledged=total,
        lost=lost,
        duplicated=duplicated,
        reordered=reordered,
        moved=moved,
        diverged=diverged,
    )


def _end(batches: list[tuple[int, bytes]]) -> int:
    """The offset after the last batch."""
    return read_header(batches[-1][1]).next_offset if batches else 0
