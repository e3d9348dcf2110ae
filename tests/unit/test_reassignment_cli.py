"""`kafkalab reassign-partitions`' files and proposal, without a cluster: Kafka's JSON
in and out, and --generate's spread of each topic over the brokers given."""

from __future__ import annotations

import json
import random

import pytest

from kafkalab.client.reassignment_cli import assignment_json, propose, read_plan


def test_kafkas_reassignment_json_round_trips(tmp_path):
    plan = {("t", 1): [3, 1], ("t", 0): [2, 3]}
    text = assignment_json(plan)
    assert json.loads(text) == {
        "version": 1,
        "partitions": [
            {"topic": "t", "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]},
            {"topic": "t", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
        ],
    }
    path = tmp_path / "plan.json"
    path.write_text(text)
    assert read_plan(str(path)) == plan


def test_a_partition_named_twice_is_refused(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(
        json.dumps(
            {"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}] * 2, "version": 1}
        )
    )
    with pytest.raises(ValueError, match="named twice"):
        read_plan(str(path))


@pytest.mark.parametrize("seed", range(5))
def test_generate_keeps_each_topics_factor_on_the_brokers_given(seed):
    current = {("a", p): [1, 2, 3] for p in range(7)} | {("b", p): [4, 1] for p in range(3)}
    proposed = propose(current, [2, 4, 5, 6], random.Random(seed))
    assert proposed.keys() == current.keys()
    for tp, replicas in proposed.items():
        assert len(replicas) == len(current[tp]) == len(set(replicas))
        assert set(replicas) <= {2, 4, 5, 6}
    # Leaders spread round robin: each broker leads one or two of a's seven partitions.
    leaders = [proposed[("a", p)][0] for p in range(7)]
    assert sorted(leaders.count(b) for b in (2, 4, 5, 6)) == [1, 2, 2, 2]


def test_generate_refuses_a_factor_above_the_brokers_given():
    with pytest.raises(ValueError, match="more than the 2 brokers"):
        propose({("a", 0): [1, 2, 3]}, [1, 2], random.Random(0))
