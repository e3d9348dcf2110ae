"""Checks for lab 05: idempotence and transactions.

Each check works its answer out from the live objects the notebook built: the
partition's producer state (``log.producer_state``), its watermarks, its files,
the transaction coordinator, the records of ``__transaction_state`` or the TLA+
spec evaluated in a state. Nothing here knows the notebook's numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kafkalab.client.aborted_transactions import AbortedTransactions
from kafkalab.labs.checks import UNANSWERED, Verdict, answered, compare, verdict
from kafkalab.records import iter_batches
from kafkalab.records.control_record import parse_control_record
from kafkalab.storage.unified_log import FetchIsolation

__all__ = [
    "batch_kinds",
    "copies_after_restart",
    "delayed_end_txn_reads",
    "epoch_after_timeout",
    "fenced_epochs",
    "last_stable_offsets",
    "marker_offsets",
    "read_committed_values",
    "retry_offsets",
    "spec_lso_and_visible",
    "version_2_epochs",
    "zombie_errors",
]


def _as(kind: type, answer: Any) -> Any:
    """The answer as a tuple/set/dict when it converts (so [3, 5] equals (3, 5)),
    else unchanged: compare then says it is not the value."""
    if not answered(answer):
        return answer
    try:
        return kind(answer)
    except (TypeError, ValueError):
        return answer


# -- part 1: the idempotent producer ----------------------------------------------------------


def retry_offsets(answer: Any, log, producer_id: int, first_seq: int, last_seq: int) -> Verdict:
    """A retry (same producer id, epoch and sequences as a batch the leader
    already wrote) is not written again: the leader finds the batch among the
    last five it keeps for that producer and answers with that batch's offsets."""
    entry = log.producer_state.producers.get(producer_id)
    original = entry.find_duplicate(first_seq, last_seq) if entry else None
    expected = None if original is None else (original.first_offset, original.last_offset)
    return compare(
        _as(tuple, answer),
        expected,
        what="the (first, last) offsets the retry is answered with",
        why="the leader keeps the metadata of each producer's last five batches and "
        "answers a retry with the offsets its first attempt got; the log does not grow",
        hint="a retry is not appended: which offsets did the same sequences get the first "
        "time? (find the batch in the table above)",
    )


_KINDS = ("duplicate", "appended", "out of order")


def _kind(entry, epoch: int, first_seq: int, last_seq: int) -> str:
    if entry is None:
        return "appended"  # an unknown producer starts at any sequence
    if epoch > entry.producer_epoch:
        return "appended" if first_seq == 0 else "out of order"
    if entry.find_duplicate(first_seq, last_seq) is not None:
        return "duplicate"
    return "appended" if first_seq == entry.last_seq + 1 else "out of order"


def batch_kinds(
    answer: Any, log, producer_id: int, epoch: int, batches: Mapping[str, tuple[int, int]]
) -> Verdict:
    """What the leader does with each candidate batch of `producer_id` at `epoch`,
    given its producer state now: ``"duplicate"`` (first and last sequence equal
    to one of the five batches it remembers: answered, not written),
    ``"appended"`` (first sequence = last sequence + 1) or ``"out of order"``
    (anything else: OUT_OF_ORDER_SEQUENCE_NUMBER, a gap or an overlap)."""
    if not answered(answer):
        return UNANSWERED
    entry = log.producer_state.producers.get(producer_id)
    expected = {name: _kind(entry, epoch, *seqs) for name, seqs in batches.items()}
    if not isinstance(answer, Mapping) or set(answer) != set(expected):
        return Verdict(False, f"answer with a dict naming each batch: {sorted(expected)}")
    odd = sorted(v for v in answer.values() if v not in _KINDS)
    if odd:
        return Verdict(False, f"each answer is one of {_KINDS}, not {odd}")
    wrong = sorted(name for name in expected if answer[name] != expected[name])
    return verdict(
        not wrong,
        "a batch whose first AND last sequence match a remembered batch is a retry; the "
        "next batch must start right after the last sequence written; anything else "
        "is refused with OUT_OF_ORDER_SEQUENCE_NUMBER",
        f"look again at {', '.join(wrong)}: a duplicate must match a whole remembered batch "
        "(first and last sequence), and only last sequence + 1 comes next",
    )


def fenced_epochs(answer: Any, log, producer_id: int, candidates: Iterable[int]) -> Verdict:
    """The epochs of `producer_id` the leader refuses with INVALID_PRODUCER_EPOCH:
    every epoch older than the one its producer state holds now."""
    if not answered(answer):
        return UNANSWERED
    current = log.producer_state.producers[producer_id].producer_epoch
    expected = {e for e in candidates if e < current}
    return compare(
        _as(set, answer),
        expected,
        what="the set of fenced epochs",
        why=f"the partition holds epoch {current} for producer {producer_id}: an older "
        "epoch is a replaced instance (INVALID_PRODUCER_EPOCH); a newer one is accepted "
        "when it starts at sequence 0",
        hint="the leader compares a batch's epoch with the epoch in its producer state: "
        "only older epochs are fenced",
    )


def copies_after_restart(
    answer: Any, log, new_producer_id: int, value: bytes, first_seq: int = 0
) -> Verdict:
    """How many records holding `value` the log will hold once a restarted producer
    (no transactional.id, so a new producer id at epoch 0) resends it: the
    leader can only recognise a retry of the same producer id."""
    copies = sum(r.value == value for b in iter_batches(_log_bytes(log)) for r in b.records)
    entry = log.producer_state.producers.get(new_producer_id)
    known = entry is not None and any(b.first_seq == first_seq for b in entry.batches)
    return compare(
        answer,
        copies if known else copies + 1,
        what=f"the number of copies of {value!r}",
        why="the restarted producer has a new producer id; the partition knows nothing of "
        "it, so its batch is new, not a retry: idempotence covers one producer session, "
        "and only a transactional.id (with its epoch) carries a producer across restarts",
        hint="the leader recognises a retry by producer id, epoch and sequences: does it "
        "know the new producer id?",
    )


def _log_bytes(log) -> bytes:
    return b"".join(Path(s.log.path).read_bytes() for s in log.segments)


# -- part 2: transactions by hand -------------------------------------------------------------


def last_stable_offsets(answer: Any, logs: Mapping[str, Any]) -> Verdict:
    """Each partition's LSO, worked out as Kafka's UnifiedLog.lastStableOffset does:
    the first offset of the oldest transaction that is open, or ended by a
    marker not yet below the high watermark (the first unstable offset), and
    never past the high watermark: min(HW, first unstable offset)."""
    if not answered(answer):
        return UNANSWERED
    expected = {}
    for name, log in logs.items():
        first = log.producer_state.first_unstable_offset()
        hw = log.high_watermark
        expected[name] = hw if first is None else min(hw, max(first, log.log_start_offset))
    if not isinstance(answer, Mapping) or set(answer) != set(expected):
        return Verdict(False, f"answer with a dict of LSOs by partition: {sorted(expected)}")
    wrong = sorted(n for n in expected if answer[n] != expected[n])
    return verdict(
        not wrong,
        f"{expected}: the LSO is min(HW, first offset of the oldest transaction not yet "
        "stable); with no such transaction it is the HW",
        f"look again at {', '.join(wrong)}: where does its oldest unfinished transaction "
        "(open, or marker above the HW) begin, and is that below the high watermark?",
    )


def _read_committed(log) -> list[bytes]:
    limit = log.last_fetchable_offset(FetchIsolation.TXN_COMMITTED)
    data = log.read(log.log_start_offset, 1 << 24, max_offset=limit).read_bytes()
    aborted = log.collect_aborted_transactions(log.log_start_offset, limit)
    keep = AbortedTransactions((a.producer_id, a.first_offset) for a in aborted)
    return [r.value for b in iter_batches(data) if keep.keep(b) for r in b.records]


def read_committed_values(answer: Any, logs: Iterable, candidates: Iterable[str]) -> Verdict:
    """Which of `candidates` (record values) a read_committed consumer returns:
    the leader's read up to the LSO plus its aborted-transaction list (from the
    `.txnindex`), filtered as the consumer filters (no control records, no batch
    of an aborted transaction)."""
    if not answered(answer):
        return UNANSWERED
    returned = {v.decode() for log in logs for v in _read_committed(log)}
    expected = {c for c in candidates if c in returned}
    return compare(
        _as(set, answer),
        expected,
        what="what read_committed returns",
        why="records below the LSO, minus the batches of transactions the .txnindex lists "
        "as aborted; a record of another producer in the middle of an aborted "
        "transaction is kept",
        hint="read_committed drops only the batches of the aborted producer between its "
        "transaction's first offset and its ABORT marker",
    )


def zombie_errors(
    answer: Any, coordinator, transactional_id: str, log, producer_id: int, zombie_epoch: int
) -> Verdict:
    """What the coordinator and a partition leader answer a request with the
    zombie's epoch: the coordinator compares it with the epoch of the
    transactional id (PRODUCER_FENCED when older), the leader with the epoch its
    producer state learned from data and markers (INVALID_PRODUCER_EPOCH)."""
    if not answered(answer):
        return UNANSWERED
    (described,) = coordinator.describe_transactions([transactional_id])
    at_leader = log.producer_state.producers[producer_id].producer_epoch
    expected = {
        "EndTxn": "PRODUCER_FENCED" if zombie_epoch < described.producer_epoch else "NONE",
        "Produce": "INVALID_PRODUCER_EPOCH" if zombie_epoch < at_leader else "NONE",
    }
    return compare(
        _as(dict, answer),
        expected,
        what="the zombie's answers",
        why=f"the coordinator holds epoch {described.producer_epoch} for {transactional_id!r} "
        f"and the partition learned epoch {at_leader} from the ABORT marker; both are newer "
        f"than the zombie's {zombie_epoch}",
        hint="each of them compares the request's epoch with the newest it knows; the "
        "coordinator answers a fenced producer PRODUCER_FENCED, a partition leader "
        "INVALID_PRODUCER_EPOCH",
    )


# -- part 3: on a cluster ---------------------------------------------------------------------


def marker_offsets(answer: Any, partition_dir: Path) -> Verdict:
    """The offsets of the control batches (COMMIT/ABORT markers) in a partition,
    read from the replica's `.log` files."""
    if not answered(answer):
        return UNANSWERED
    found = {}
    for path in sorted(Path(partition_dir).glob("*.log")):
        for batch in iter_batches(path.read_bytes()):
            if batch.header.is_control_batch:
                kind = parse_control_record(batch.records[0]).type.name
                found[batch.header.base_offset] = kind
    return compare(
        _as(dict, answer),
        found,
        what="the markers by offset",
        why="every commit or abort writes one control record, which takes an offset of "
        "its own in each partition of the transaction and is never returned to a consumer",
        hint="count every record written, in order, and give each commit and abort one "
        "offset of its own",
    )


def epoch_after_timeout(answer: Any, records: list[dict]) -> Verdict:
    """The producer epoch of the transactional id's last `__transaction_state`
    record after the coordinator aborted a timed-out transaction (read from a
    broker's files: offset, state, producer epoch per record)."""
    if not answered(answer):
        return UNANSWERED
    return compare(
        answer,
        records[-1]["producer epoch"],
        what="the producer epoch after the timeout",
        why="the coordinator aborts a timed-out transaction with the epoch bumped by one "
        "(transaction version 1 does this only here and at InitProducerId), so the hung "
        "instance's next request is fenced",
        hint="the coordinator fences the hung instance when it aborts for it: what does that take?",
    )


# -- part 4: the spec -------------------------------------------------------------------------


def spec_lso_and_visible(answer: Any, spec, state: dict, partition: str) -> Verdict:
    """The spec's Lso(p) and Visible(p) in one state, evaluated by the TLA+
    evaluator: (LSO, set of visible offsets)."""
    if not answered(answer) or not isinstance(answer, tuple | list) or len(answer) != 2:
        return UNANSWERED if not answered(answer) else Verdict(False, "answer (lso, visible)")
    if not answered(*answer):
        return UNANSWERED
    lso = spec.evaluate(f'Lso("{partition}")', state=state)
    visible = set(spec.evaluate(f'Visible("{partition}")', state=state))
    got_lso, got_visible = answer
    return compare(
        (got_lso, _as(set, got_visible)),
        (lso, visible),
        what=f"(Lso, Visible) of {partition}",
        why="the LSO is the first offset of a data record with no marker after it (the log "
        "length when there is none); visible are the offsets below it whose first marker "
        "after them is a commit",
        hint="find the first data record no marker follows; then keep, below it, the data "
        "records whose next marker is a commit",
    )


# -- part 5: transaction versions -------------------------------------------------------------


def delayed_end_txn_reads(answer: Any, run, topic: str) -> Verdict:
    """Which of the scenario's records (a1, b1, b2) a read_committed consumer
    returned after KAFKA-17754's delayed EndTxn (the run's read_committed final
    logs, kafkalab.cluster.delayed_end_txn)."""
    if not answered(answer):
        return UNANSWERED
    returned = {
        value.decode()
        for p in (0, 1)
        for _, value in run.history.committed_finals.get((topic, p), [])
    }
    return compare(
        _as(set, answer),
        returned,
        what="what read_committed returns",
        why="T1 aborted (a1 gone); T1's held EndTxn(abort) arrived while T2 was open in the "
        "same epoch and aborted it (b1 gone); the producer then added p1, wrote b2 and "
        "committed: a new transaction for the coordinator, so b2 is committed",
        hint="the held request names producer id and epoch only: which transaction was "
        "Ongoing for that epoch when it arrived? And what is T2 to the coordinator after that?",
    )


def version_2_epochs(answer: Any, trace) -> Verdict:
    """Under transaction version 2, in a spec trace where transaction 1's EndTxn
    was held: the epoch transaction 2 runs with, and the epoch the held request
    carries (from the trace's states)."""
    if not answered(answer):
        return UNANSWERED
    held = next(m["epoch"] for s in trace.states for m in s["delayed"])
    in_t2 = next(p["epoch"] for s in trace.states for p in s["producer"].values() if p["txn"] == 2)
    return compare(
        _as(dict, answer),
        {"T2": in_t2, "held": held},
        what="(the epoch of T2, the epoch of the held EndTxn)",
        why="version 2 bumps the epoch at every EndTxn and returns it: T1's EndTxn (its "
        "retry) took the epoch T1 ran with to the next one, which T2 runs with; the held "
        "first attempt was built before, with T1's",
        hint="which epoch did T1 run with, and what does an EndTxn do to it under version 2?",
    )
