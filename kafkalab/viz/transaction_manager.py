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
    path = list(transitions)
    g = graphviz.Digraph(graph_attr={"rankdir": "LR", "fontname": "Helvetica"})
    g.attr("node", shape="box", style="rounded,filled", fontname="Helvetica")
    g.attr("edge", fontname="Helvetica", fontsize="10")
    if title:
        g.attr(label=title, labelloc="t")
    current = path[-1][1] if path else S.UNINITIALIZED
    for state in TransactionState:
        g.node(
            state.value,
            state.value,
            fillcolor=_COLOURS[state],
            penwidth="3" if state is current else "1",
        )
    taken: dict[tuple[TransactionState, TransactionState], list[str]] = {}
    for step, (src, dst) in enumerate(path, start=1):
        taken.setdefault((src, dst), []).append(str(step))
    for src, dst in EDGES:
        steps = taken.get((src, dst))
        if steps:
            g.edge(
                src.value,
                dst.value,
                label=", ".join(steps),
                color="#d62728",
                fontcolor="#d62728",
                penwidth="2.5",
            )
        elif dst is not S.FATAL_ERROR:
            g.edge(src.value, dst.value, color="#bbbbbb")
    return g
