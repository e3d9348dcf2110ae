"""The transaction coordinator pictures of labs/05_transactions: the edges drawn are
exactly those the state machine makes, and the path is read from real
__transaction_state records written by the coordinator."""

from __future__ import annotations

import pytest
from txn_harness import TxnHarness

from kafkalab.coordinator.transaction import TransactionStateMachine
from kafkalab.coordinator.transaction.transaction_state_machine import TransactionState
from kafkalab.errors import KafkaError
from kafkalab.viz.transactions import (
    DEAD,
    STATES,
    TRANSITIONS,
    transaction_log_table,
    transaction_state_graph,
    transaction_state_path,
)

T0, T1 = ("t", 0), ("t", 1)


def _explore() -> set[tuple[str, str]]:
    """Every (state, next state) the machine writes, found by trying every operation
    from every reachable state. A transition is written when the state name changes,
    or by InitProducerId (the epoch) and AddPartitionsToTxn (the partitions) even
    when it does not; marker progress is not written, only its completion."""
    edges: set[tuple[str, str]] = set()
    seen: set[TransactionState] = set()
    todo = [TransactionStateMachine(7).current]
    while todo:
        s = todo.pop()
        if s in seen or s.producer_epoch > 3:
            continue
        seen.add(s)
        ops = [
            ("init", lambda m: m.init_producer_id()),
            ("add", lambda m, e=s.producer_epoch: m.add_partitions(e, [T0])),
            ("add", lambda m, e=s.producer_epoch: m.add_partitions(e, [T1])),
            ("end", lambda m, e=s.producer_epoch: m.end_txn(e, True)),
            ("end", lambda m, e=s.producer_epoch: m.end_txn(e, False)),
            ("timeout", lambda m: m.timeout_abort()),
            ("complete", lambda m: [m.marker_written(tp) for tp in m.current.pending_markers]),
        ]
        for kind, op in ops:
            m = TransactionStateMachine.load(s)
            try:
                op(m)
                if kind == "complete":
                    m.complete()
            except KafkaError:
                pass
            after = m.current
            if after == s:
                continue
            if after.state != s.state or kind in ("init", "add"):
                edges.add((s.state, after.state))
            todo.append(after)
    return edges


def test_transitions_are_exactly_what_the_state_machine_makes():
    drawn = {edge for edge in TRANSITIONS if DEAD not in edge}
    assert _explore() == drawn


def test_every_state_and_transition_is_drawn_grey_without_a_path():
    lines = [line.strip() for line in transaction_state_graph().source.splitlines()]
    nodes = {line.split(" [")[0] for line in lines if "->" not in line and "[label=" in line}
    assert nodes == set(STATES)
    edges = {tuple(line.split(" [")[0].split(" -> ")) for line in lines if "->" in line}
    assert edges == set(TRANSITIONS)
    assert not any("#d62728" in line for line in lines)


def _committed_aborted_fenced() -> TxnHarness:
    h = TxnHarness()
    init = h.call("init_producer_id", "app", 60_000)
    pid, epoch = init.producer_id, init.producer_epoch
    h.call("add_partitions_to_txn", "app", pid, epoch, [T0, T1])
    h.call("end_txn", "app", pid, epoch, True)
    h.write_markers()
    h.call("add_partitions_to_txn", "app", pid, epoch, [T0])
    h.call("end_txn", "app", pid, epoch, False)
    h.write_markers()
    h.call("add_partitions_to_txn", "app", pid, epoch, [T1])
    h.call("init_producer_id", "app", 60_000)  # a new instance: the open one is aborted
    h.write_markers()
    h.call("init_producer_id", "app", 60_000)
    return h


def test_the_path_read_from_the_coordinators_records():
    h = _committed_aborted_fenced()
    records = [(i, k, v) for i, (k, v) in enumerate(h.logs[h.coordinator.partition_for("app")])]
    path = transaction_state_path(records, "app")
    assert path == [
        ("Empty", "Ongoing"),
        ("Ongoing", "PrepareCommit"),
        ("PrepareCommit", "CompleteCommit"),
        ("CompleteCommit", "Ongoing"),
        ("Ongoing", "PrepareAbort"),
        ("PrepareAbort", "CompleteAbort"),
        ("CompleteAbort", "Ongoing"),
        ("Ongoing", "PrepareAbort"),
        ("PrepareAbort", "CompleteAbort"),
        ("CompleteAbort", "Empty"),  # InitProducerId: Kafka's prepareIncrementProducerEpoch
    ]
    assert transaction_state_path(records, "someone-else") == []
    lines = transaction_state_graph(path).source.splitlines()
    red = [line for line in lines if "->" in line and "#d62728" in line]
    assert len(red) == len(set(path))
    assert any("Ongoing -> PrepareAbort" in line and '"5, 8:' in line for line in red)
    (current,) = [line for line in lines if line.strip().startswith("Empty [")]
    assert "penwidth=3" in current

    table = transaction_log_table(records)
    assert list(table["state"]) == ["Empty"] + [dst for _, dst in path]
    assert list(table["epoch"])[-3:] == [1, 1, 2]  # the fence bumped it, then InitProducerId
    assert table["partitions"].iloc[1] == "t-0, t-1"


def test_a_tombstone_is_dead_and_an_impossible_path_is_refused():
    h = TxnHarness()
    h.call("init_producer_id", "app", 60_000)
    h.advance(h.config.transactional_id_expiration_ms + 3_600_000)
    records = [(i, k, v) for i, (k, v) in enumerate(h.logs[h.coordinator.partition_for("app")])]
    assert transaction_state_path(records, "app") == [("Empty", DEAD)]
    assert transaction_log_table(records)["state"].iloc[-1] == "Dead (tombstone)"
    with pytest.raises(ValueError, match="Empty -> PrepareCommit"):
        transaction_state_graph([("Empty", "PrepareCommit")])


def test_partition_offsets_and_strip_from_a_real_log(tmp_path):
    from kafkalab.records import ControlRecordType, SimpleRecord, build_batch
    from kafkalab.records.control_record import build_end_txn_marker_batch
    from kafkalab.storage import UnifiedLog
    from kafkalab.storage.unified_log import AppendOrigin
    from kafkalab.viz.transactions import OFFSET_KINDS, partition_offsets, partition_strip

    def txn(values, pid, seq):
        return build_batch(
            [SimpleRecord(v) for v in values],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
            is_transactional=True,
        )

    def marker(pid, kind):
        return build_end_txn_marker_batch(pid, 0, kind, 0)

    with UnifiedLog(tmp_path / "t-0") as log:
        log.append_as_leader(build_batch([SimpleRecord(b"plain")]))  # 0
        log.append_as_leader(txn([b"c1", b"c2"], 7, 0))  # 1, 2
        log.append_as_leader(txn([b"a1"], 8, 0))  # 3
        log.append_as_leader(marker(7, ControlRecordType.COMMIT), origin=AppendOrigin.COORDINATOR)
        log.append_as_leader(txn([b"o1"], 7, 2))  # 5: producer 7's next transaction
        log.append_as_leader(marker(8, ControlRecordType.ABORT), origin=AppendOrigin.COORDINATOR)
        log.update_high_watermark(log.log_end_offset)
        marks = {"LSO": log.last_stable_offset, "HW": log.high_watermark, "LEO": log.log_end_offset}
    assert marks == {"LSO": 5, "HW": 7, "LEO": 7}
    assert partition_offsets(tmp_path / "t-0") == [
        (0, "plain", "plain"),
        (1, "c1", "committed"),
        (2, "c2", "committed"),
        (3, "a1", "aborted"),
        (4, "COMMIT", "COMMIT marker"),
        (5, "o1", "open"),
        (6, "ABORT", "ABORT marker"),
    ]
    strip = partition_strip(tmp_path / "t-0", marks)
    assert strip.pipe(format="svg").startswith(b"<?xml")  # graphviz accepts the label
    src = strip.source
    cells = src.split("<TR>")[1]
    assert cells.count("<TD") == 8  # offsets 0..6 and the empty one at the LEO
    assert f'<TD BGCOLOR="{OFFSET_KINDS["aborted"]}"><FONT POINT-SIZE="9">3</FONT>' in cells
    under = src.split("<TR>")[2].split("</TR>")[0].split("<TD")[1:]
    assert ["LSO" in c for c in under] == [False] * 5 + [True, False, False]
    assert ["HW" in c and "LEO" in c for c in under] == [False] * 7 + [True]
