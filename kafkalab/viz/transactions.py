"""The transaction coordinator as pictures and tables: its states with the path a
transactional id took, and the `__transaction_state` records that path left.
Used by labs/05_transactions.

    transaction_log_table(records)                 # pandas: one row per record, decoded
    transaction_state_path(records, "shop-tx")     # [(from, to), ...] read from the records
    transaction_state_graph(path, title=None)      # graphviz: every state and edge, the path red
    partition_strip(directory, {"LSO": 2, "HW": 7})  # graphviz: a partition's offsets, by transaction

The path is read from the coordinator's own records, not from a model: every
transition the coordinator makes is written to `__transaction_state` before it
is acknowledged, so consecutive records of one transactional id are its path.
A tombstone (null value: the id expired, `transactional.id.expiration.ms`) is
drawn as Kafka's `Dead`.

`TRANSITIONS` are the edges kafkalab's coordinator can write, each with what
causes it; tests/unit/test_viz_transactions.py explores TransactionStateMachine
and checks that they are exactly the transitions it makes. They are Kafka's
`TransactionState.validPreviousStates` (TxnState, VALID_PREVIOUS_STATES) for transaction version 1 (InitProducerId
on a completed transaction writes Empty with the next epoch, as Kafka's
prepareIncrementProducerEpoch), but for one thing: kafkalab never writes
PrepareEpochFence: its fencing InitProducerId goes straight to PrepareAbort
with the new epoch. `TRANSITIONS_V2` adds the edges of transaction version 2
(KIP-890 part 2): an EndTxn v5 abort with no transaction open.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape
from pathlib import Path

import graphviz
import pandas as pd

from kafkalab.coordinator.transaction import transaction_log as tlog
from kafkalab.coordinator.transaction.transaction_state import TxnState
from kafkalab.records.control_record import ControlRecordType, control_record_type
from kafkalab.records.memory_records import iter_batches
from kafkalab.viz.pictures import state_machine_graph

EMPTY, ONGOING = TxnState.EMPTY, TxnState.ONGOING
PREPARE_COMMIT, PREPARE_ABORT = TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT
COMPLETE_COMMIT, COMPLETE_ABORT = TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT
DEAD = TxnState.DEAD  # Kafka's name for an id whose tombstone was written
STATES = (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD)

#: (from, to) -> what makes the coordinator write `to` after `from`
TRANSITIONS: dict[tuple[TxnState, TxnState], str] = {
    (EMPTY, EMPTY): "InitProducerId",
    (EMPTY, ONGOING): "AddPartitionsToTxn",
    (ONGOING, ONGOING): "AddPartitionsToTxn (more)",
    (ONGOING, PREPARE_COMMIT): "EndTxn(commit)",
    (ONGOING, PREPARE_ABORT): "EndTxn(abort), timeout, InitProducerId",
    (PREPARE_COMMIT, COMPLETE_COMMIT): "every COMMIT marker written",
    (PREPARE_ABORT, COMPLETE_ABORT): "every ABORT marker written",
    (COMPLETE_COMMIT, ONGOING): "AddPartitionsToTxn",
    (COMPLETE_ABORT, ONGOING): "AddPartitionsToTxn",
    (COMPLETE_COMMIT, EMPTY): "InitProducerId",
    (COMPLETE_ABORT, EMPTY): "InitProducerId",
    (EMPTY, DEAD): "expired",
    (COMPLETE_COMMIT, DEAD): "expired",
    (COMPLETE_ABORT, DEAD): "expired",
}

#: version 2's edges: TRANSITIONS and an abort when the client is not sure a
#: transaction is open (every EndTxn v5 also bumps the epoch, on any edge)
TRANSITIONS_V2: dict[tuple[TxnState, TxnState], str] = {
    **TRANSITIONS,
    (EMPTY, PREPARE_ABORT): "EndTxn v5 (abort), no transaction open",
    (COMPLETE_COMMIT, PREPARE_ABORT): "EndTxn v5 (abort), no transaction open",
    (COMPLETE_ABORT, PREPARE_ABORT): "EndTxn v5 (abort), no transaction open",
}

_COLOURS = {
    EMPTY: "#eeeeee",
    ONGOING: "#cfe2f3",
    PREPARE_COMMIT: "#d9f0d3",
    PREPARE_ABORT: "#fde2c8",
    COMPLETE_COMMIT: "#b6d7a8",
    COMPLETE_ABORT: "#f4cccc",
    DEAD: "#dddddd",
}

Record = tuple[int, bytes | None, bytes | None]  # (offset, key, value)


def transaction_log_table(records: Iterable[Record]) -> pd.DataFrame:
    """One row per `__transaction_state` record (offset, key, value), decoded as
    `kafkalab dump-log --transaction-log-decoder` does; a tombstone's columns are empty."""
    columns = [
        "offset",
        "transactional id",
        "producer id",
        "epoch",
        "state",
        "partitions",
        "timeout ms",
        "start ms",
        "last update ms",
    ]
    rows = []
    for offset, key, value in records:
        if key is None:
            continue
        row: dict = dict.fromkeys(columns, "")
        row.update({"offset": offset, "transactional id": tlog.read_key(key)})
        if value is None:
            row["state"] = f"{DEAD} (tombstone)"
        else:
            v = tlog.read_value(value)
            row.update(
                {
                    "producer id": v.producer_id,
                    "epoch": v.producer_epoch,
                    "state": v.state,
                    "partitions": ", ".join(f"{t}-{p}" for t, p in sorted(v.partitions)),
                    "timeout ms": v.transaction_timeout_ms,
                    "start ms": v.start_timestamp_ms,
                    "last update ms": v.last_update_timestamp_ms,
                }
            )
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def transaction_state_path(
    records: Iterable[Record], transactional_id: str
) -> list[tuple[str, str]]:
    """The transitions `transactional_id` made, from its records in offset order:
    (state of one record, state of the next). The first record has no predecessor."""
    states = []
    for _, key, value in records:
        if key is None or tlog.read_key(key) != transactional_id:
            continue
        states.append(DEAD if value is None else tlog.read_value(value).state)
    return list(zip(states, states[1:], strict=False))


def transaction_state_graph(
    transitions: Iterable[tuple[str, str]] = (), title: str | None = None
) -> graphviz.Digraph:
    """Every state and every transition the coordinator can write (grey, labelled
    with its cause; dashed to Dead); the transitions taken thick and red, labelled
    with their step numbers; the current state (the last target) bold. A
    transition outside TRANSITIONS raises ValueError: the picture would lie."""
    path = [(src, dst, str(step)) for step, (src, dst) in enumerate(transitions, start=1)]
    for src, dst, _ in path:
        if (src, dst) not in TRANSITIONS:
            raise ValueError(f"{src} -> {dst} is not a transition the coordinator makes")
    edges = [
        (src, dst, cause, "dashed" if dst == DEAD else "solid")
        for (src, dst), cause in TRANSITIONS.items()
    ]
    return state_machine_graph(
        {state: _COLOURS[state] for state in STATES}, edges, path, title=title
    )


#: what an offset of a partition holds, and its colour in `partition_strip`
OFFSET_KINDS = {
    "plain": "#ffffff",  # no transaction
    "open": "#cfe2f3",  # a transaction with no marker yet
    "committed": "#b6d7a8",
    "aborted": "#f4cccc",
    "COMMIT marker": "#6aa84f",
    "ABORT marker": "#e06666",
}


def partition_offsets(directory: str | Path) -> list[tuple[int, str, str]]:
    """(offset, value or marker, kind) for every record in a partition directory's
    `.log` files, read from the files. A transactional record's kind is decided by
    the first COMMIT/ABORT marker of its producer after it: `committed`, `aborted`,
    or `open` while there is none."""
    rows: list[tuple[int, str, str, int]] = []  # offset, text, kind, producer id
    for log in sorted(Path(directory).glob("*.log")):
        for batch in iter_batches(log.read_bytes()):
            h = batch.header
            for r in batch.records:
                if h.is_control_batch:
                    kind = f"{control_record_type(r).name} marker"
                    rows.append((r.offset, kind.split()[0], kind, h.producer_id))
                else:
                    text = "null" if r.value is None else r.value.decode("utf-8", "replace")
                    rows.append(
                        (r.offset, text, "open" if h.is_transactional else "plain", h.producer_id)
                    )
    out = []
    for i, (offset, text, kind, pid) in enumerate(rows):
        if kind == "open":
            end = next(
                (k for _, _, k, p in rows[i + 1 :] if p == pid and k.endswith("marker")), None
            )
            if end is not None:
                kind = "committed" if end.startswith(ControlRecordType.COMMIT.name) else "aborted"
        out.append((offset, text, kind))
    return out


def partition_strip(
    directory: str | Path, marks: Mapping[str, int] | None = None, title: str | None = None
) -> graphviz.Digraph:
    """A partition's offsets in a row, each coloured by what it holds (OFFSET_KINDS),
    with `marks` (e.g. {"LSO": ..., "HW": ..., "LEO": ...}) under the offset each
    points at: the first offset *not* below it. A mark at the log end offset points
    at an empty cell after the last record."""
    records = partition_offsets(directory)
    marks = marks or {}
    end = max([o + 1 for o, _, _ in records] + list(marks.values()) + [0])
    by_offset = {o: (text, kind) for o, text, kind in records}
    top, bottom = [], []
    for offset in range(min([o for o, _, _ in records] + [end]), end + 1):
        text, kind = by_offset.get(offset, ("", None))
        colour = OFFSET_KINDS[kind] if kind else "#f7f7f7"
        style = "" if kind else ' STYLE="dashed"'
        top.append(
            f'<TD BGCOLOR="{colour}"{style}><FONT POINT-SIZE="9">{offset}</FONT>'
            f"<BR/>{escape(text[:12])}</TD>"
        )
        names = [name for name, at in marks.items() if at == offset]
        label = "<BR/>".join(f"&#8593; {escape(n)}" for n in names)
        bottom.append(f'<TD BORDER="0"><B>{label}</B></TD>' if label else '<TD BORDER="0"> </TD>')
    legend = " ".join(
        f'<TD BGCOLOR="{c}"><FONT POINT-SIZE="9">{escape(k)}</FONT></TD>'
        for k, c in OFFSET_KINDS.items()
    )
    span = len(top)
    html = (
        '<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="4">'
        f"<TR>{''.join(top)}</TR><TR>{''.join(bottom)}</TR>"
        f'<TR><TD BORDER="0" COLSPAN="{span}"><TABLE BORDER="0" CELLBORDER="1" '
        f'CELLSPACING="2"><TR>{legend}</TR></TABLE></TD></TR></TABLE>>'
    )
    g = graphviz.Digraph(graph_attr={"fontname": "Helvetica"})
    g.attr("node", shape="plaintext", fontname="Helvetica", fontsize="11")
    if title:
        g.attr(label=title, labelloc="t")
    g.node("strip", html)
    return g
