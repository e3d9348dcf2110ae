"""The transactional producer's state machine picture: drawn from EDGES, with the
path a producer took in red and its current state bold."""

from __future__ import annotations

from kafkalab.client.transaction_manager import EDGES
from kafkalab.client.transaction_manager import TransactionState as S
from kafkalab.viz.transaction_manager import transaction_manager_graph


def test_every_edge_but_the_fatal_ones_is_drawn():
    src = transaction_manager_graph().source
    drawn = {
        tuple(part.strip().strip('"') for part in line.split("[")[0].split("->"))
        for line in src.splitlines()
        if "->" in line
    }
    assert drawn == {(a.value, b.value) for a, b in EDGES if b is not S.FATAL_ERROR}


def test_the_path_is_red_and_numbered_and_the_current_state_bold():
    path = [
        (S.UNINITIALIZED, S.INITIALIZING),
        (S.INITIALIZING, S.READY),
        (S.READY, S.IN_TRANSACTION),
        (S.IN_TRANSACTION, S.ABORTABLE_ERROR),
        (S.ABORTABLE_ERROR, S.FATAL_ERROR),
    ]
    lines = transaction_manager_graph(path).source.splitlines()
    red = [line for line in lines if "->" in line and "#d62728" in line]
    assert len(red) == 5
    assert any("ABORTABLE_ERROR -> FATAL_ERROR" in line and "label=5" in line for line in red)
    (fatal,) = [line for line in lines if line.strip().startswith("FATAL_ERROR [")]
    assert "penwidth=3" in fatal
