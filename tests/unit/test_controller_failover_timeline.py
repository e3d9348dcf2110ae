"""kafkalab.cluster.controller_failover without processes: a timeline read from
events files written by hand (the processes' test is
tests/faults/test_controller_failover_phases.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from kafkalab.cluster.controller_failover import PHASES, read_controller_timeline


def _write(directory: Path, events: list[dict]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "events.jsonl", "w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")


def _state(t, state, epoch, leader, frm, from_epoch):
    return {
        "time_ms": t,
        "event": "quorum_state",
        "state": state,
        "epoch": epoch,
        "leader": leader,
        "from": frm,
        "from_epoch": from_epoch,
    }


class _Running:
    process = SimpleNamespace(poll=lambda: None)


@pytest.fixture
def cluster(tmp_path):
    dirs = {c: tmp_path / f"controller-{c}" for c in (3001, 3002, 3003)}
    # 3003 wins epoch 2 after 3001 (epoch 1) is killed at t=1000; 3002 votes for it
    _write(
        dirs[3003],
        [
            _state(900, "follower", 1, 3001, "unattached", 1),  # before the kill: ignored
            _state(1700, "prospective", 1, 3001, "follower", 1),
            _state(1710, "candidate", 2, -1, "prospective", 1),
            _state(1725, "leader", 2, 3003, "candidate", 2),
            {"time_ms": 1735, "event": "leader_change_committed", "epoch": 2, "offset": 40},
            {"time_ms": 1736, "event": "controller_activated", "epoch": 2},
            {"time_ms": 1740, "event": "broker_heartbeat", "broker": 2, "epoch": 2},
            {"time_ms": 1980, "event": "broker_heartbeat", "broker": 1, "epoch": 2},
        ],
    )
    _write(
        dirs[3002],
        [
            _state(1702, "prospective", 1, 3001, "follower", 1),
            _state(1712, "unattached", 2, -1, "prospective", 1),
            _state(1730, "follower", 2, 3003, "unattached", 2),
        ],
    )
    _write(dirs[3001], [_state(1500, "leader", 7, 3001, "candidate", 7)])  # the dead one's
    return SimpleNamespace(
        controllers={c: SimpleNamespace(dir=d) for c, d in dirs.items()},
        brokers={1: _Running(), 2: _Running()},
    )


def test_the_phases_of_a_failover_read_from_the_voters_events(cluster):
    t = read_controller_timeline(cluster, 3001, 1, 1000.0, topic_created_ms=1760, first_ack_ms=1800)
    assert (t.new_leader, t.epoch) == (3003, 2)
    assert t.phase_ends() == {
        "fetch timeout": 700,
        "pre-vote": 710,
        "vote": 725,
        "LeaderChange committed": 735,
        "activation": 736,
        "brokers on the new leader": 980,
        "topic created": 760,
        "first record": 800,
    }
    table = t.phases().set_index("phase")
    assert list(table.index) == list(PHASES)
    # the last three start from the activation, side by side, not one after the other
    assert table.loc["brokers on the new leader", "start ms"] == 736
    assert table.loc["topic created", "start ms"] == 736
    assert table.loc["first record", "start ms"] == 760
    assert table.loc["first record", "ms"] == 40
    assert t.total_ms == 800
    moves = t.transitions()
    assert list(moves.voter) == [3003, 3002, 3003, 3002, 3003, 3002]
    assert list(moves.to) == [
        "prospective",
        "prospective",
        "candidate",
        "unattached",
        "leader",
        "follower",
    ]


def test_a_broker_not_yet_on_the_new_leader_leaves_that_phase_open(cluster):
    cluster.brokers[3] = _Running()  # a third running broker never heartbeated it
    t = read_controller_timeline(cluster, 3001, 1, 1000.0)
    ends = t.phase_ends()
    assert ends["brokers on the new leader"] is None
    assert ends["first record"] is None and t.total_ms is None
    assert t.phases().set_index("phase").ms.isna()["first record"]


def test_no_leader_in_a_higher_epoch_no_phases(cluster, tmp_path):
    t = read_controller_timeline(cluster, 3001, 2, 1000.0)  # epoch 2 was the old one
    assert t.new_leader == -1
    assert all(v is None for v in t.phase_ends().values())
