"""The controller's configs (ConfigurationControlManager): AlterConfigs and
IncrementalAlterConfigs become ConfigRecords in the metadata log, checked as
Kafka's controller checks them, and a controller reopened from its log has the
same configs (hypothesis: any run of operations, against a model)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalab.controller.configuration_control_manager import OpType, ResourceType
from kafkalab.controller.metadata_image import MetadataImage
from kafkalab.controller.quorum_controller import QuorumController
from kafkalab.errors import Errors

TOPIC, BROKER = ResourceType.TOPIC, ResourceType.BROKER
SET, DELETE, APPEND, SUBTRACT = OpType.SET, OpType.DELETE, OpType.APPEND, OpType.SUBTRACT


def controller_with_topic(directory: Path, brokers: int = 1) -> QuorumController:
    c = QuorumController(directory)
    for b in range(1, brokers + 1):
        epoch = c.register_broker(b, "127.0.0.1", 9000 + b, f"incarnation-{b}", 0)
        c.heartbeat(b, epoch, 0)
    c.create_topic("t", 1, brokers, {"retention.ms": "1000"})
    return c


def config_records(c: QuorumController) -> list[dict]:
    return [r for _, r in c.records_since(0) if r["type"] == "ConfigRecord"]


def test_incremental_set_delete_append_subtract(tmp_path):
    c = controller_with_topic(tmp_path)
    ops = [
        ("retention.ms", SET, "5000"),
        ("cleanup.policy", APPEND, "compact"),  # on the default, delete
        ("min.insync.replicas", SET, "2"),
    ]
    assert c.alter_configs([(TOPIC, "t", ops)], incremental=True) == [None]
    assert c.topics["t"].configs == {
        "retention.ms": "5000",
        "cleanup.policy": "delete,compact",
        "min.insync.replicas": "2",
    }
    ops = [("cleanup.policy", SUBTRACT, "delete"), ("retention.ms", DELETE, None)]
    assert c.alter_configs([(TOPIC, "t", ops)], incremental=True) == [None]
    assert c.topics["t"].configs == {"cleanup.policy": "compact", "min.insync.replicas": "2"}
    # Kafka's fields, a null value for the deletion
    assert config_records(c)[-1] == {
        "type": "ConfigRecord",
        "resource_type": 2,
        "resource_name": "t",
        "name": "retention.ms",
        "value": None,
    }


def test_legacy_alter_configs_replaces_the_whole_set(tmp_path):
    c = controller_with_topic(tmp_path)
    assert c.alter_configs([(TOPIC, "t", {"segment.bytes": "2048"})], incremental=False) == [None]
    assert c.topics["t"].configs == {"segment.bytes": "2048"}  # retention.ms deleted


@pytest.mark.parametrize(
    ("resource", "code", "message"),
    [
        ((TOPIC, "t", [("no.such.config", SET, "1")]), Errors.INVALID_CONFIG, "Unknown topic"),
        ((TOPIC, "t", [("retention.ms", SET, "soon")]), Errors.INVALID_CONFIG, "retention.ms"),
        ((TOPIC, "t", [("min.insync.replicas", SET, "0")]), Errors.INVALID_CONFIG, "at least"),
        ((TOPIC, "t", [("retention.ms", APPEND, "1")]), Errors.INVALID_CONFIG, "not LIST"),
        ((TOPIC, "gone", [("retention.ms", SET, "1")]), Errors.UNKNOWN_TOPIC_OR_PARTITION, "gone"),
        ((TOPIC, "", [("retention.ms", SET, "1")]), Errors.INVALID_REQUEST, "Default topic"),
        ((BROKER, "x", [("log.retention.ms", SET, "1")]), Errors.INVALID_REQUEST, "base 10"),
        ((BROKER, "-1", [("log.retention.ms", SET, "1")]), Errors.INVALID_REQUEST, "negative"),
        ((32, "g", [("x", SET, "1")]), Errors.INVALID_REQUEST, "resource type"),
        ((TOPIC, "t", [("retention.ms", 7, "1")]), Errors.INVALID_REQUEST, "operations type"),
    ],
)
def test_refusals_write_nothing_and_leave_other_resources_alone(tmp_path, resource, code, message):
    c = controller_with_topic(tmp_path)
    before = len(config_records(c))
    good = (TOPIC, "t", [("retention.ms", SET, "7000")])
    outcomes = c.alter_configs([resource, good], incremental=True)
    assert outcomes[0] is not None and outcomes[0].code == code
    assert message in outcomes[0].message
    assert outcomes[1] is None
    assert len(config_records(c)) == before + 1
    assert c.topics["t"].configs["retention.ms"] == "7000"


def test_validate_only_checks_and_writes_nothing(tmp_path):
    c = controller_with_topic(tmp_path)
    end = c.metadata_offset
    bad = (TOPIC, "t", [("retention.ms", SET, "x")])
    good = (TOPIC, "t", [("retention.ms", SET, "9")])
    assert c.alter_configs([bad], incremental=True, validate_only=True)[0].code == (
        Errors.INVALID_CONFIG
    )
    assert c.alter_configs([good], incremental=True, validate_only=True) == [None]
    assert c.metadata_offset == end
    assert c.topics["t"].configs == {"retention.ms": "1000"}


def test_broker_configs_survive_a_restart_and_replay_on_brokers(tmp_path):
    c = controller_with_topic(tmp_path)
    assert c.alter_configs(
        [
            (BROKER, "", [("log.retention.ms", SET, "60000")]),
            (BROKER, "1", [("min.insync.replicas", SET, "2"), ("custom.key", SET, "v")]),
        ],
        incremental=True,
    ) == [None, None]
    c.close()
    again = QuorumController(tmp_path)
    assert again.image.broker_configs == {
        "": {"log.retention.ms": "60000"},
        "1": {"min.insync.replicas": "2", "custom.key": "v"},
    }
    image = MetadataImage()  # what a broker replaying the log has
    for _, record in again.records_since(0):
        image.replay(record)
    assert image.broker_configs == again.image.broker_configs
    assert image.topics["t"].configs == {"retention.ms": "1000"}
    again.close()


def test_unclean_election_enabled_dynamically_elects_a_leaderless_partition(tmp_path):
    c = controller_with_topic(tmp_path, brokers=2)
    part = c.topics["t"].partitions[0]
    leader, follower = part.replicas
    # the follower leaves the ISR, then the leader dies: no clean choice
    c.alter_partition(
        leader, c.brokers[leader].broker_epoch, "t", 0, 0, part.partition_epoch, [leader]
    )
    c.fence_broker(leader, 0)
    assert c.topics["t"].partitions[0].leader == -1
    ops = [("unclean.leader.election.enable", SET, "true")]
    assert c.alter_configs([(BROKER, "", ops)], incremental=True) == [None]
    assert c.topics["t"].partitions[0].leader == follower
    assert c.topics["t"].partitions[0].isr == [follower]


KEYS = ["retention.ms", "cleanup.policy", "segment.bytes", "min.insync.replicas"]
VALUES = {
    "retention.ms": st.integers(-1, 10**9).map(str),
    "cleanup.policy": st.sampled_from(["delete", "compact"]),
    "segment.bytes": st.integers(14, 10**9).map(str),
    "min.insync.replicas": st.integers(1, 3).map(str),
}
OP = st.sampled_from(KEYS).flatmap(
    lambda key: st.tuples(
        st.just(key), st.sampled_from([SET, DELETE, APPEND, SUBTRACT]), VALUES[key]
    )
)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(OP, min_size=1, max_size=3, unique_by=lambda o: o[0]), max_size=6))
def test_any_run_of_operations_matches_the_model_and_survives_a_restart(requests):
    with tempfile.TemporaryDirectory() as d:
        c = controller_with_topic(Path(d))
        model = {"retention.ms": "1000"}
        for ops in requests:
            expected = dict(model)
            refused = False
            for key, op, value in ops:
                if op == SET:
                    expected[key] = value
                elif op == DELETE:
                    expected.pop(key, None)
                elif key != "cleanup.policy":
                    refused = True  # APPEND/SUBTRACT on a non-list config
                else:
                    parts = expected.get(key, "delete").split(",")
                    if op == APPEND and value not in parts:
                        parts.append(value)
                    if op == SUBTRACT and value in parts:
                        parts.remove(value)
                    expected[key] = ",".join(p for p in parts if p)
            if expected.get("cleanup.policy") == "":
                refused = True  # every policy subtracted: not a valid cleanup.policy
            (outcome,) = c.alter_configs([(TOPIC, "t", ops)], incremental=True)
            assert (outcome is not None) == refused, outcome
            if not refused:
                model = expected
            assert c.topics["t"].configs == model
        c.close()
        again = QuorumController(Path(d))
        assert again.topics["t"].configs == model
        again.close()
