"""Kinds as enums (kafkalab.kinds): parsed at the boundary with a typed error naming
the valid values, and printed, compared and serialized as the strings users know."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from kafkalab.cluster import checker
from kafkalab.cluster.history import (
    READ_COMMITTED,
    History,
    Isolation,
    OpKind,
    Verdict,
    check,
)
from kafkalab.cluster.local_cluster import ProcessState, process_state
from kafkalab.cluster.soak import (
    ALL_KINDS,
    CONTROLLER_KINDS,
    EXTRA_KINDS,
    FAULT_KINDS,
    NEMESIS_KINDS,
    FaultKind,
    FaultRecord,
    Soak,
    SoakReport,
    schedule,
)
from kafkalab.errors import UnknownKindError
from kafkalab.kinds import Kind
from kafkalab.spark.errors import KafkaSourceOptionError
from kafkalab.spark.options import (
    OffsetSpecKind,
    SubscriptionKind,
    TimestampStrategy,
    parse_read_options,
)


class Colour(Kind):
    RED = "red"
    DARK_BLUE = "dark-blue"


def test_parse_takes_values_and_members_and_names_the_valid_values_otherwise():
    assert Colour.parse("dark-blue") is Colour.DARK_BLUE
    assert Colour.parse(Colour.RED) is Colour.RED
    with pytest.raises(UnknownKindError) as e:
        Colour.parse("DARK_BLUE", "colour")
    assert str(e.value) == "unknown colour 'DARK_BLUE'; choose from red, dark-blue"
    assert (e.value.what, e.value.got, e.value.valid) == (
        "colour",
        "DARK_BLUE",
        ("red", "dark-blue"),
    )
    assert isinstance(e.value, ValueError)  # callers that caught ValueError still do
    with pytest.raises(UnknownKindError, match="unknown Colour 'green'"):
        Colour.parse("green")


def test_members_are_their_strings_in_print_format_json_and_dicts():
    assert f"{Colour.DARK_BLUE}" == str(Colour.DARK_BLUE) == "dark-blue"
    assert f"{Colour.RED:<6}|" == "red   |"
    assert json.dumps({Colour.RED: [Colour.DARK_BLUE]}) == '{"red": ["dark-blue"]}'
    assert {"red": 1}[Colour.RED] == 1 and Colour.RED == "red"
    assert Colour.values() == ("red", "dark-blue")


# -- cluster.soak ---------------------------------------------------------------------------


def test_fault_kinds_are_the_soaks_names_and_every_one_has_a_fault():
    assert ALL_KINDS == FAULT_KINDS + EXTRA_KINDS + CONTROLLER_KINDS + NEMESIS_KINDS
    assert ALL_KINDS == tuple(FaultKind)
    assert FaultKind.values() == (
        "leader-kill",
        "follower-pause",
        "power-failure",
        "link-cut",
        "rolling-restart",
        "leader-pause",
        "controller-kill",
        "controller-pause",
        "controller-power-failure",
        "quorum-partition",
        "partition-one",
        "partition-leader",
        "partition-ring",
        "clients-cut",
        "clock-step",
        "lazyfs-power-failure",
    )
    assert set(Soak._FAULTS) == set(FaultKind)


def test_schedule_parses_names_and_the_report_prints_them_as_before():
    plan = schedule(20, 3, ["link-cut", "leader-kill"])
    assert all(isinstance(k, FaultKind) for k in plan)
    assert set(plan) == {FaultKind.LINK_CUT, FaultKind.LEADER_KILL}
    # The same seed chooses the same faults whether named by string or by member.
    assert plan == schedule(20, 3, [FaultKind.LINK_CUT, FaultKind.LEADER_KILL])
    with pytest.raises(UnknownKindError, match="choose from leader-kill, follower-pause"):
        schedule(1, 0, ["leader_kill"])
    report = SoakReport(faults=2, seed=3, kinds=(FaultKind.LINK_CUT, FaultKind.LEADER_KILL))
    report.records = [
        FaultRecord(1, FaultKind.LEADER_KILL, 1, True, 1.0, 250.0),
        FaultRecord(2, FaultKind.LEADER_KILL, 2, True, 1.0, 300.0),
    ]
    assert json.dumps(report.by_kind) == '{"leader-kill": 2}'
    assert ("by kind", "leader-kill 2") in report.rows()


# -- spark.options ----------------------------------------------------------------------------

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_spark_kinds_come_from_the_options_and_bad_values_name_the_valid_ones():
    o = parse_read_options({**BS, "subscribePattern": "t.*"}, streaming=True)
    assert o.subscription.kind is SubscriptionKind.SUBSCRIBE_PATTERN
    assert o.starting.kind is OffsetSpecKind.LATEST
    assert o.starting_by_timestamp_strategy is TimestampStrategy.ERROR
    o = parse_read_options(
        {
            **BS,
            "assign": '{"t": [0]}',
            "startingOffsetsByTimestamp": '{"t": {"0": 5}}',
            "startingOffsetsByTimestampStrategy": " LATEST ",
            "kafka.isolation.level": "READ_COMMITTED",
        },
        streaming=False,
    )
    assert o.subscription.kind is SubscriptionKind.ASSIGN
    assert o.starting.kind is OffsetSpecKind.TIMESTAMPS
    assert o.starting_by_timestamp_strategy is TimestampStrategy.LATEST
    # librdkafka gets the plain string
    assert type(o.consumer_config("driver")["isolation.level"]) is str
    assert o.consumer_config("driver")["isolation.level"] == "read_committed"
    with pytest.raises(KafkaSourceOptionError, match="must be 'error' or 'latest', got 'never'"):
        parse_read_options(
            {**BS, "subscribe": "t", "startingOffsetsByTimestampStrategy": "never"}, False
        )


# -- cluster.history --------------------------------------------------------------------------


def test_history_ops_carry_kinds_and_isolation_levels_are_parsed():
    h = History()
    h.send("t", 0, b"a", txn="x")
    h.ack("t", 0, b"a", 0)
    h.commit("x")
    h.read("t", 0, 0, b"a", reader="r", isolation="read_committed")
    assert [op.kind for op in h.ops] == [OpKind.SEND, OpKind.ACK, OpKind.COMMIT, OpKind.READ]
    assert [op.kind for op in h.ops] == ["send", "ack", "commit", "read"]  # as the labs match
    assert h.ops[-1].isolation is Isolation.READ_COMMITTED == READ_COMMITTED
    with pytest.raises(UnknownKindError, match="choose from read_uncommitted, read_committed"):
        h.read("t", 0, 0, b"a", isolation="read-committed")
    with pytest.raises(UnknownKindError, match="isolation level"):
        h.final_log("t", 0, [(0, b"a")], isolation="committed")
    h.final_log("t", 0, [(0, b"a")])
    h.final_log("t", 0, [(0, b"a")], isolation="read_committed")
    assert check(h).valid


# -- cluster.local_cluster ----------------------------------------------------------------------


def test_process_state_of_a_real_process_running_paused_and_down():
    child = subprocess.Popen(["sleep", "60"])
    try:
        assert process_state(child.pid) is ProcessState.RUNNING
        os.kill(child.pid, signal.SIGSTOP)
        while process_state(child.pid) is not ProcessState.PAUSED:  # the kernel's own pace
            time.sleep(0.01)
        assert process_state(child.pid) == "paused"  # as `kafkalab cluster status` prints it
        os.kill(child.pid, signal.SIGCONT)
    finally:
        child.kill()
        child.wait()
    assert process_state(child.pid) is ProcessState.DOWN
    assert process_state(None) is ProcessState.DOWN


# -- client.consumer ----------------------------------------------------------------------------


def test_the_teaching_consumer_parses_its_reset_and_isolation_settings():
    from kafkalab.client.consumer import IsolationLevel, KafkaConsumer, OffsetResetStrategy

    with pytest.raises(
        UnknownKindError, match="auto.offset.reset 'smallest'; choose from earliest"
    ):
        KafkaConsumer({"bootstrap.servers": "127.0.0.1:1", "auto.offset.reset": "smallest"})
    with pytest.raises(UnknownKindError, match="choose from read_uncommitted, read_committed"):
        KafkaConsumer({"bootstrap.servers": "127.0.0.1:1", "isolation.level": "committed"})
    c = KafkaConsumer(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    try:
        assert c._offset_reset is OffsetResetStrategy.EARLIEST and c._reset_timestamp() == -2
        assert c._isolation is IsolationLevel.READ_COMMITTED and c._isolation.id == 1
        assert c.config["auto.offset.reset"] == "earliest"  # the config reads as given
    finally:
        c.close()
    assert IsolationLevel.READ_UNCOMMITTED.id == 0


def test_the_soaks_own_verdict_counts_failed_sends_and_compared_batches():
    def report(**changes) -> SoakReport:
        r = SoakReport(faults=1, seed=0, kinds=(FaultKind.LEADER_KILL,))
        r.records = [FaultRecord(1, FaultKind.LEADER_KILL, 1, True, 1.0, 250.0)]
        r.acknowledged, r.read_all = 10, True
        r.replicas_compared, r.batches_compared = 3, 4
        r.verdict = checker.Verdict(True, {}, frozenset(), [], {})  # the checker's
        r.final_log = Verdict(True, 10, [], [], [], [], [])  # the replicas compared
        for name, value in changes.items():
            setattr(r, name, value)
        return r

    assert report().valid
    assert not report(failed_sends=1).valid  # as the CI slice counts it
    assert not report(batches_compared=0).valid and not report(batches_compared=0).byte_identical
    assert not report(acknowledged=0).valid
