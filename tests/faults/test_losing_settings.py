"""Settings known to lose, on a real cluster, judged by the Jepsen-grade checker:
each verdict names the anomaly the setting explains, with its evidence (values,
offsets, processes), and nothing the setting does not explain
(kafkalab.cluster.losing_settings runs them; lab 03 part 5 classifies them)."""

from __future__ import annotations

import pytest

from kafkalab.cluster import LocalCluster
from kafkalab.cluster.checker import check
from kafkalab.cluster.losing_settings import (
    LOSING_CLUSTER,
    acks_1_leader_kill,
    auto_commit_crash,
    unclean_election,
)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(base_dir=tmp_path, **LOSING_CLUSTER) as c:
        yield c


def values(prefix, numbers):
    return {b"%s-%d" % (prefix, n) for n in numbers}


def found(verdict, name, field="value"):
    return {case[field] for case in verdict.anomalies.get(name, [])}


def test_acks_1_with_a_leader_kill_loses_acknowledged_writes_and_reuses_their_offsets(cluster):
    run = acks_1_leader_kill(cluster)
    verdict = run.verdict()
    assert not verdict.valid
    assert set(verdict.anomalies) == run.expected, verdict.summary()
    # p1's w-0..19 took offsets 50..69: c0 read past v-50..69, which no ok poll read
    assert found(verdict, "lost-write") == values(b"v", range(50, 70)), verdict.summary()
    for case in verdict.anomalies["lost-write"]:
        n = int(case["value"].split(b"-")[1])
        assert case["offset"] == n and case["writer"][1] == "p0"
        assert case["max read"] == b"w-19" and case["max reader"][1] == "c0"
    # the acknowledgement says v-50 is at 50, the poll says w-0 is
    assert found(verdict, "inconsistent-offsets", "offset") == set(range(50, 70))
    for case in verdict.anomalies["inconsistent-offsets"]:
        o = case["offset"]
        assert case["values"] == [b"v-%d" % o, b"w-%d" % (o - 50)]
        assert {process for _, process, _ in case["ops"]} == {"p0", "p1", "c0"}
    # v-70..99 sat above every read: unseen, not lost-write
    (unseen,) = verdict.anomalies["unseen"]
    assert set(unseen["values"]) == set(run.at_risk) == values(b"v", range(50, 100))
    assert verdict.unseen_series[-1][1] == {("acks-1", 0): 50}


def test_an_unclean_election_loses_what_only_the_dead_leader_had(cluster):
    run = unclean_election(cluster)
    verdict = run.verdict()
    assert not verdict.valid
    assert set(verdict.anomalies) == run.expected, verdict.summary()
    # the new leader had none of v-0..19; p1's w-0..9 took offsets 0..9
    assert found(verdict, "lost-write") == values(b"v", range(10)), verdict.summary()
    assert {case["max reader"][1] for case in verdict.anomalies["lost-write"]} == {"c0"}
    assert found(verdict, "inconsistent-offsets", "offset") == set(range(10))
    (unseen,) = verdict.anomalies["unseen"]
    assert set(unseen["values"]) == set(run.at_risk) == values(b"v", range(20))
    assert {w[1] for w in unseen["writers"]} == {"p0"}


def test_auto_commit_and_a_consumer_crash_lose_the_batch_the_consumer_never_processed(cluster):
    run = auto_commit_crash(cluster)
    verdict = run.verdict()
    assert not verdict.valid
    assert set(verdict.anomalies) == run.expected, verdict.summary()
    crashed = set(run.at_risk)
    assert crashed, "the crashed poll handed over records"
    # read only by c0's crashed (info) poll; c1 resumed past them
    assert found(verdict, "lost-write") == crashed, verdict.summary()
    assert {case["max reader"][1] for case in verdict.anomalies["lost-write"]} == {"c1"}
    (unseen,) = verdict.anomalies["unseen"]
    assert set(unseen["values"]) == crashed
    # Nothing of the kind in the log: a read from its start (Jepsen's final polls)
    # finds them all, and the verdict is clean. The loss is the consumer's.
    clean = check(run.with_final_read(cluster.bootstrap_servers), run.settings)
    assert clean.valid and not clean.anomalies, clean.summary()
