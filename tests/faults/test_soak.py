"""The soak's CI slices: six faults of every broker kind on a live cluster under
an idempotent acks=all load with a consumer reading along, five on a cluster
with a controller quorum (every controller kind, one overlap), and six of the
nemeses' kinds and lazyfs's power failure on a quorum (one overlap); the Jepsen-grade
checker's verdict must be valid and the replicas byte-identical
(benchmarks/soak.py runs the full 100). And what the soak found, each as a
regression test of its own."""

from __future__ import annotations

import random
import subprocess
import sys
import time
import types

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.failover import LABS_QUORUM, LABS_QUORUM_SESSION_MS
from kafkalab.cluster.history import History, check
from kafkalab.cluster.soak import (
    CONTROLLER_KINDS,
    FAULT_KINDS,
    ISR_OF_ONE,
    NEMESIS_KINDS,
    OVERLAPS,
    FaultKind,
    Soak,
    _cluster_settings,
    _create_topic,
    default_kinds,
    overlaps,
    percentile,
    run_soak,
    schedule,
)
from kafkalab.cluster.workload import record_replicas, wait_for_replicas_in_sync

#: Seed 1's first six faults cover every kind (two leader kills among them).
SLICE_SEED, SLICE_FAULTS = 1, 6
#: With a quorum, seed 47's first five faults are a controller kill with a follower
#: pause inside it (an overlap), a controller pause, a quorum partition and a
#: controller power failure: every controller kind.
QUORUM_SEED, QUORUM_FAULTS = 47, 5
#: Of the nemeses' kinds, seed 168's first six faults are a lazyfs power failure,
#: a partition of one host with a clock step inside it (an overlap), a
#: majorities ring, the clients cut off from the leader and the leader's host
#: partitioned off: every one of NEMESIS_KINDS.
NEMESIS_SEED, NEMESIS_FAULTS = 168, 6

#: What each fault kind takes out at worst: (brokers, controller voters). A host's
#: partition or power failure takes a broker and (with a quorum) its voter.
TAKES_OUT = {
    FaultKind.LEADER_KILL: (1, 0),
    FaultKind.FOLLOWER_PAUSE: (1, 0),
    FaultKind.POWER_FAILURE: (1, 0),
    FaultKind.LINK_CUT: (1, 0),
    FaultKind.ROLLING_RESTART: (1, 0),
    FaultKind.LEADER_PAUSE: (1, 0),
    FaultKind.CONTROLLER_KILL: (0, 1),
    FaultKind.CONTROLLER_PAUSE: (0, 1),
    FaultKind.CONTROLLER_POWER_FAILURE: (0, 1),
    FaultKind.QUORUM_PARTITION: (0, 1),
    FaultKind.PARTITION_ONE: (1, 1),
    FaultKind.PARTITION_LEADER: (1, 1),
    FaultKind.PARTITION_RING: (1, 1),
    FaultKind.LAZYFS_POWER_FAILURE: (1, 1),
    FaultKind.CLIENTS_CUT: (0, 0),
    FaultKind.CLOCK_STEP: (0, 0),
}


def test_the_schedule_is_the_seeds_and_the_slice_has_every_kind():
    assert schedule(SLICE_FAULTS, SLICE_SEED) == schedule(SLICE_FAULTS, SLICE_SEED)
    assert set(schedule(SLICE_FAULTS, SLICE_SEED)) == set(FAULT_KINDS)
    assert schedule(50, 0, ["leader-kill"]) == ["leader-kill"] * 50
    with pytest.raises(ValueError, match="unknown fault kind"):
        schedule(1, 0, ["meteor"])


def test_the_quorum_slice_has_every_controller_kind_and_an_overlap():
    plan = schedule(QUORUM_FAULTS, QUORUM_SEED, default_kinds(3))
    assert set(CONTROLLER_KINDS) <= set(plan)
    assert overlaps(plan, QUORUM_SEED) == [0]
    assert (plan[0], plan[1]) == ("controller-kill", "follower-pause")
    assert default_kinds(1) == FAULT_KINDS


def test_overlaps_pair_only_what_leaves_a_majority_and_follow_the_seed():
    plan = schedule(400, 3, default_kinds(3))
    outer = overlaps(plan, 3)
    assert outer == overlaps(plan, 3) and outer  # the seed's, and some
    for i in outer:
        assert (plan[i], plan[i + 1]) in OVERLAPS
        assert i + 1 not in outer  # a fault is inside at most one other, never both
    # never two controller faults, never two brokers out of the ISR at once (but
    # the cut follower with its leader killed, which OVERLAPS explains)
    assert set(TAKES_OUT) == set(FaultKind)
    for a, b in OVERLAPS:
        assert not (a in CONTROLLER_KINDS and b in CONTROLLER_KINDS)
        brokers = TAKES_OUT[a][0] + TAKES_OUT[b][0]
        voters = TAKES_OUT[a][1] + TAKES_OUT[b][1]
        assert voters <= 1, (a, b)
        assert brokers <= 1 or (a, b) == ("link-cut", "leader-kill"), (a, b)
    # the nemeses' kinds overlap, each with something
    paired = {k for pair in OVERLAPS for k in pair}
    assert set(NEMESIS_KINDS) <= paired
    brokers_only = schedule(100, 0)  # of broker kinds, only that pair overlaps
    assert {(brokers_only[i], brokers_only[i + 1]) for i in overlaps(brokers_only, 0)} == {
        ("link-cut", "leader-kill")
    }
    assert overlaps(["link-cut", "leader-kill"] * 20, 5)


def test_the_nemesis_slice_has_every_nemesis_kind_and_an_overlap():
    plan = schedule(NEMESIS_FAULTS, NEMESIS_SEED, NEMESIS_KINDS)
    assert set(plan) == set(NEMESIS_KINDS)
    assert overlaps(plan, NEMESIS_SEED) == [1]
    assert (plan[1], plan[2]) == ("partition-one", "clock-step")
    assert not set(NEMESIS_KINDS) & set(default_kinds(3))  # asked for by name only


def test_controller_faults_need_a_quorum():
    with pytest.raises(ValueError, match="need a quorum"):
        run_soak(faults=1, kinds=["controller-kill"])


def test_kafkalab_soak_on_the_command_line():
    """`kafkalab soak` as a user runs it: one controller kill on a quorum, the report
    printed, exit 0 for a valid verdict; 2 for a controller kind without a quorum."""
    run = [sys.executable, "-m", "kafkalab", "soak", "--faults", "1", "--kinds", "controller-kill"]
    refused = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "need a quorum" in refused.stderr, refused.stderr
    done = subprocess.run([*run, "--controllers", "3"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "controller-kill controller 300" in done.stdout, done.stdout
    verdict = [line for line in done.stdout.splitlines() if line.startswith("verdict")]
    assert verdict and verdict[-1].split() == ["verdict", "valid"], done.stdout


def test_percentile_is_the_nearest_rank():
    values = list(range(1, 101))
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (
        50,
        99,
        100,
    )
    assert percentile([7.0], 99) == 7.0 and percentile([], 50) is None


def test_on_a_quorum_a_brokers_session_outlasts_a_controller_failover():
    """With a quorum, brokers get LABS_QUORUM_SESSION_MS (longer than the resign and
    election a controller failover takes), not the single controller's 500 ms under
    which a quorum partition fenced every broker; the caller's setting still wins."""
    fetch_ms = int(LABS_QUORUM["controller.quorum.fetch.timeout.ms"])
    election_ms = int(LABS_QUORUM["controller.quorum.election.timeout.ms"])
    assert _cluster_settings(None)["session_timeout_ms"] == 500
    quorum = _cluster_settings(None, controllers=3)
    assert quorum["session_timeout_ms"] == LABS_QUORUM_SESSION_MS >= 2 * (fetch_ms + election_ms)
    mine = _cluster_settings({"session_timeout_ms": 700}, controllers=3)
    assert mine["session_timeout_ms"] == 700


def test_a_slice_of_the_soak_loses_nothing(tmp_path):
    lines: list[str] = []
    client_log = tmp_path / "producer.log"
    report = run_soak(
        faults=SLICE_FAULTS,
        seed=SLICE_SEED,
        base_dir=tmp_path / "cluster",
        log=lines.append,
        client_log=client_log,
    )
    table = report.table() + "\n" + "\n".join(lines)
    # The clients' side, for a stall to be explained: the producer's idempotence and
    # requests, the read-along consumer's fetches.
    debug = client_log.read_text()
    assert "Idempotent producer state change" in debug and "Sent ProduceRequest" in debug
    assert "rdkafka#consumer" in debug and "Sent FetchRequest" in debug
    assert report.error is None, table
    assert report.survived == SLICE_FAULTS, table
    assert set(report.by_kind) == set(FAULT_KINDS), table  # every kind was applied
    assert report.acknowledged > 0 and report.failed_sends == 0, table
    _assert_nothing_lost(report, table)
    # Every leader kill was followed by a record acknowledged by the successor.
    assert len(report.failovers_ms) == report.by_kind["leader-kill"], table
    # The consumer read every record, in order, and all three replicas hold the
    # same bytes below the high watermark.
    assert report.read_all and not report.read_gaps, table
    assert report.replicas_compared == 3 and report.batches_compared > 0, table
    assert report.byte_identical, table
    assert report.valid, table


def _assert_nothing_lost(report, table):
    v = report.verdict
    assert v is not None and v.valid, table
    for anomaly in ("lost-write", "duplicate", "unseen", "poll-skip", "nonmonotonic-poll"):
        assert not report.anomalies(anomaly), table
    assert not v.bad, table  # nothing outside the allowed set


def test_a_slice_of_the_soak_on_a_controller_quorum(tmp_path):
    lines: list[str] = []
    report = run_soak(
        faults=QUORUM_FAULTS,
        seed=QUORUM_SEED,
        base_dir=tmp_path,
        log=lines.append,
        controllers=3,
        overlap=True,
    )
    table = report.table() + "\n" + "\n".join(lines)
    assert report.error is None, table
    assert report.survived == QUORUM_FAULTS, table
    assert set(CONTROLLER_KINDS) <= set(report.by_kind), table
    assert report.overlapped == [("controller-kill", "follower-pause")], table
    # the killed, paused or partitioned voter was the active controller
    led = {"controller-kill", "controller-pause", "quorum-partition"}
    assert all(r.was_leader for r in report.records if r.kind in led), table
    # a kill of the active controller: a successor led in a higher epoch, then the
    # next acks=all record was acknowledged
    assert len(report.controller_failovers_ms) == 1, table
    assert report.acknowledged > 0 and report.failed_sends == 0, table
    _assert_nothing_lost(report, table)
    assert report.read_all and report.byte_identical and report.replicas_compared == 3, table
    # librdkafka's own view of the partition, kept for when a consumer stops
    assert report.read_fetch_state.startswith("active, leader "), table
    assert report.valid, table


def test_a_slice_of_the_nemeses_soak_on_a_quorum_loses_nothing(tmp_path):
    """Partitions of one host, of the leader's and a majorities ring (refused or
    dropped, by the seed), the clients cut off from the leader (dropped: the
    idempotent producer retries), a clock stepped an hour, and a lazyfs power
    failure (every file of a node back to its last fsync), on a quorum with the
    durability ledger on: nothing acknowledged is lost or duplicated."""
    lines: list[str] = []
    report = run_soak(
        faults=NEMESIS_FAULTS,
        seed=NEMESIS_SEED,
        kinds=NEMESIS_KINDS,
        base_dir=tmp_path,
        log=lines.append,
        controllers=3,
        overlap=True,
    )
    table = report.table() + "\n" + "\n".join(lines)
    assert report.error is None, table
    assert report.survived == NEMESIS_FAULTS, table
    assert set(report.by_kind) == set(NEMESIS_KINDS), table
    assert report.overlapped == [("partition-one", "clock-step")], table
    # each nemesis says what it did: the cuts and their mode, the step, the loss
    details = {r.kind: r.detail for r in report.records}
    assert details["partition-ring"].startswith("majorities-ring ("), table
    assert details["partition-leader"].startswith("primaries ("), table
    assert details["clients-cut"].endswith("deaf to clients (drop)"), table
    assert "clock stepped" in details["clock-step"], table
    assert "bytes lost in" in details["lazyfs-power-failure"], table
    leader_cut = next(r for r in report.records if r.kind == "partition-leader")
    assert leader_cut.was_leader, table
    assert report.acknowledged > 0 and report.failed_sends == 0, table
    _assert_nothing_lost(report, table)
    assert report.read_all and report.byte_identical and report.replicas_compared == 3, table
    assert report.valid, table


def test_a_leader_killed_right_after_a_dropped_ring_partition(tmp_path):
    """Found by soak-all: a majorities ring in drop mode healed, the followers still
    waiting out their dropped fetches, the leader reported a whole ISR, then shrank
    it to itself (its AlterPartition refused by a standby, retried, committed); the
    soak took the partition as healed and killed the leader, the ISR's only member:
    no clean leader, ever. The soak now waits until every replica fetched past the
    heal, the ISR is whole in every replica's view and no change is pending; and a
    shrink that still lands after that (the followers fenced during the ring, not
    eligible again until unfenced) makes a kill of the sole ISR member what Kafka
    makes it, unavailability until the broker is back, which the soak reports
    (ISR_OF_ONE) and goes on from: every kill has a successor or that report."""
    lines: list[str] = []
    report = run_soak(
        faults=4,
        seed=20,  # a ring (dropped), a leader kill, a ring (dropped), a leader kill
        kinds=["partition-ring", "leader-kill"],
        base_dir=tmp_path,
        log=lines.append,
        controllers=3,
    )
    table = report.table() + "\n" + "\n".join(lines)
    assert [str(r.kind) for r in report.records] == ["partition-ring", "leader-kill"] * 2, table
    assert all("(drop)" in r.detail for r in report.records[::2]), table
    kills = report.records[1::2]
    assert all((r.failover_ms is None) == (r.detail == ISR_OF_ONE) for r in kills), table
    assert len(report.failovers_ms) + len(report.unavailable) == 2, table
    _assert_nothing_lost(report, table)
    assert report.valid, table


def test_a_leader_killed_while_the_active_controller_is_paused(tmp_path):
    """Found by the soak on a quorum: while the active controller was SIGSTOPped,
    every broker's heartbeats and metadata fetches waited on it (its socket
    accepted them, it never answered), so when the partition's leader was killed
    the successor the other controllers elected reached no broker: no leader for
    as long as the pause lasted (the soak gave up after 120 s). Brokers now give a
    silent controller up after the request timeout and ask the next one."""
    lines: list[str] = []
    report = run_soak(
        faults=2,
        seed=8,  # seed 8 runs the leader kill inside the pause
        kinds=["controller-pause", "leader-kill"],
        base_dir=tmp_path,
        log=lines.append,
        controllers=3,
        overlap=True,
    )
    table = report.table() + "\n" + "\n".join(lines)
    assert report.overlapped == [("controller-pause", "leader-kill")], table
    assert len(report.failovers_ms) == 1, table  # a successor acknowledged a record
    _assert_nothing_lost(report, table)
    assert report.valid, table


def test_a_follower_more_than_a_fetch_behind_catches_up(tmp_path):
    """Found by the soak (a power failure wiped a follower of a 120,000-record
    log): a follower fetches at most 1 MiB a partition, the leader cuts that
    byte range inside a batch, and the follower refused the whole response as
    CORRUPT_MESSAGE, again and again: it never caught up and the partition
    stayed under-replicated. Now it appends the whole batches and fetches on."""
    with LocalCluster(brokers=3, base_dir=tmp_path, session_timeout_ms=1500) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        new = NewTopic("behind", 1, replica_assignment=[[1, 2, 3]])
        for future in admin.create_topics([new]).values():
            future.result(10)
        wait_for_replicas_in_sync(cluster, "behind")
        cluster.kill(3)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for n in range(30_000):  # about 3.5 MiB: several fetches' worth
            while True:
                try:
                    producer.produce("behind", b"%06d" % n + b"x" * 100, partition=0)
                    break
                except BufferError:
                    producer.poll(0.05)
        assert producer.flush(60) == 0
        cluster.restart(3)
        rows = wait_for_replicas_in_sync(cluster, "behind", timeout=60)
        assert set(rows.LEO) == {30_000}
        history = History()
        record_replicas(cluster, "behind", 0, history)
        verdict = check(history)
        assert len(history.replicas[("behind", 0)]) == 3
        assert not verdict.diverged, verdict.summary()


def test_killing_a_leader_alone_in_its_isr_is_unavailability_not_a_failed_soak(tmp_path):
    """Found by the soak: after a dropped-packet partition healed, the ISR shrank to
    the leader alone, and the next fault killed that leader. No other replica may
    lead (no unclean election): the partition is unavailable until the broker is
    back, and nothing is lost. The soak sees it in the survivors' metadata (an ISR
    of the dead leader), restarts it, as a supervisor would, and says so
    (ISR_OF_ONE), where it used to wait 120 s for a successor and fail."""
    with LocalCluster(brokers=3, base_dir=tmp_path, session_timeout_ms=1000) as cluster:
        _create_topic(cluster, "alone")
        no_load = types.SimpleNamespace(ack_times_ms=[])  # nothing acknowledged: no successor
        soak = Soak(cluster, "alone", no_load, random.Random(0), pause_s=0.5)
        leader = soak.leader()
        for follower in soak.followers(leader):
            cluster.kill(follower)
        deadline = time.monotonic() + 60
        while soak._replica_states().get(leader, {}).get("isr") != [leader]:
            assert time.monotonic() < deadline, soak._replica_states()
            time.sleep(0.1)
        fault = soak._leader_kill(leader)
        applied = next(fault)
        assert (applied.target, applied.failover_ms, applied.detail) == (leader, None, ISR_OF_ONE)
        assert soak.leader() == leader  # back, and leading again: the only one who may
        with pytest.raises(StopIteration):
            next(fault)
