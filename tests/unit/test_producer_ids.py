"""Producer ids are never handed out twice: not after a restart, and not by two
brokers of one cluster (two idempotent producers with one id would fence or
reorder each other's sequences)."""

import pytest

from kafkalab.server.producer_ids import BLOCK_SIZE, ID_STRIDE, ProducerIdManager


def test_ids_survive_a_restart_without_repeating(tmp_path):
    first = ProducerIdManager(tmp_path)
    given = [first.generate() for _ in range(5)]
    again = ProducerIdManager(tmp_path)  # a crash: the rest of the block is skipped
    assert again.generate() == BLOCK_SIZE
    assert given == list(range(5))


def test_brokers_of_one_cluster_hand_out_disjoint_ids(tmp_path):
    for b in (1, 2, 3):
        (tmp_path / str(b)).mkdir()
    managers = [ProducerIdManager(tmp_path / str(b), node_id=b) for b in (1, 2, 3)]
    ids = [m.generate() for _ in range(BLOCK_SIZE + 5) for m in managers]
    assert len(set(ids)) == len(ids)
    assert {i % ID_STRIDE for i in ids} == {1, 2, 3}


def test_a_node_id_too_large_for_the_scheme_is_refused(tmp_path):
    with pytest.raises(ValueError, match="below"):
        ProducerIdManager(tmp_path, node_id=ID_STRIDE)
