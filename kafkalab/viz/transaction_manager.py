"""The transactional producer's state machine as a picture: every state of Kafka's
TransactionManager and every allowed transition, with the path one producer took.

    transaction_manager_graph(producer.transaction_manager.transitions)

Drawn from the client's own data (`TransactionState`, `EDGES`), so the picture
cannot disagree with the code. FATAL_ERROR, reachable from everywhere, is drawn
with only the edges a producer took into it, to keep the picture readable.
"""

from __future__ import annotations

from collections.abc import Iterable

import graphviz

from kafkalab.client.transaction_manager import EDGES, TransactionState
from kafkalab.viz.pictures import state_machine_graph

S = TransactionState
_COLOURS = {
    S.UNINITIALIZED: "#eeeeee",
    S.INITIALIZING: "#fde2c8",
    S.READY: "#d9f0d3",
    S.IN_TRANSACTION: "#cfe2f3",
    S.COMMITTING_TRANSACTION: "#b6d7a8",
    S.ABORTING_TRANSACTION: "#f4cccc",
    S.ABORTABLE_ERROR: "#fff3b0",
    S.FATAL_ERROR: "#e06666",
}


def transaction_manager_graph(
    transitions: Iterable[tuple[TransactionState, TransactionState]] = (),
    title: str | None = None,
) -> graphviz.Digraph:
    """All states and allowed transitions (grey); the transitions taken thick and
    red, labelled with their step numbers; the current state (the last target) bold."""
    path = [
        (src.value, dst.value, str(step)) for step, (src, dst) in enumerate(transitions, start=1)
    ]
    taken = {(src, dst) for src, dst, _ in path}
    # FATAL_ERROR is reachable from everywhere: only the edges taken into it are drawn
    edges = [
        (src.value, dst.value, "", "solid")
        for src, dst in EDGES
        if dst is not S.FATAL_ERROR or (src.value, dst.value) in taken
    ]
    return state_machine_graph(
        {state.value: _COLOURS[state] for state in TransactionState},
        edges,
        path,
        S.UNINITIALIZED.value,
        title,
    )
