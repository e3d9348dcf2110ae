"""The soak's CI slice: six faults of every kind on a live cluster under an
idempotent acks=all load with a consumer reading along; the verdict must be
valid (benchmarks/soak.py runs the full 100). And what the soak found, each as
a regression test of its own."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.history import History, check
from kafkalab.cluster.soak import FAULT_KINDS, percentile, run_soak, schedule
from kafkalab.cluster.workload import record_replicas, wait_for_replicas_in_sync

#: Seed 1's first six faults cover every kind (two leader kills among them).
SLICE_SEED, SLICE_FAULTS = 1, 6


def test_the_schedule_is_the_seeds_and_the_slice_has_every_kind():
    assert schedule(SLICE_FAULTS, SLICE_SEED) == schedule(SLICE_FAULTS, SLICE_SEED)
    assert set(schedule(SLICE_FAULTS, SLICE_SEED)) == set(FAULT_KINDS)
    assert schedule(50, 0, ["leader-kill"]) == ["leader-kill"] * 50
    with pytest.raises(ValueError, match="unknown fault kind"):
        schedule(1, 0, ["meteor"])


def test_percentile_is_the_nearest_rank():
    values = list(range(1, 101))
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (
        50,
        99,
        100,
    )
    assert percentile([7.0], 99) == 7.0 and percentile([], 50) is None


def test_a_slice_of_the_soak_loses_nothing(tmp_path):
    lines: list[str] = []
    report = run_soak(faults=SLICE_FAULTS, seed=SLICE_SEED, base_dir=tmp_path, log=lines.append)
    table = report.table() + "\n" + "\n".join(lines)
    assert report.error is None, table
    assert report.survived == SLICE_FAULTS, table
    assert set(report.by_kind) == set(FAULT_KINDS), table  # every kind was applied
    assert report.verdict is not None and report.verdict.valid, table
    assert report.acknowledged > 0 and report.failed_sends == 0, table
    # Every leader kill was followed by a record acknowledged by the successor.
    assert len(report.failovers_ms) == report.by_kind["leader-kill"], table
    # The consumer read every record, in order, and all three replicas hold the
    # same bytes below the high watermark.
    assert report.read_all and not report.read_gaps, table
    assert report.replicas_compared == 3 and report.batches_compared > 0, table
    assert report.byte_identical, table
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
