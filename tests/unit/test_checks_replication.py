"""kafkalab.labs.checks.replication: each check passes a right answer, refuses
wrong ones with a reason, and says "not yet" to the placeholder. The live
objects are built as lab 03's notebooks build them, small."""

from pathlib import Path

import pytest

from kafkalab.controller.quorum_controller import QuorumController
from kafkalab.labs.checks import replication as checks
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.replication.partition import Partition
from kafkalab.specs.runner import find_check
from kafkalab.storage import UnifiedLog


def _not_yet(v, *words: str) -> None:
    assert not v
    assert str(v).startswith("not yet: ")
    for word in words:
        assert word in str(v), str(v)


class ByHand:
    """Notebook 1's three replicas, stepped by hand."""

    def __init__(self, root: Path) -> None:
        self.leader, self.f2, self.f3 = (self.replica(root, b) for b in (1, 2, 3))
        self.now = 0
        self.leader.make_leader(1, isr=[1, 2, 3], replicas=[1, 2, 3], partition_epoch=0, now_ms=0)
        for f in (self.f2, self.f3):
            f.make_follower(1, 1, isr=[1, 2, 3], replicas=[1, 2, 3], partition_epoch=0)

    @staticmethod
    def replica(root: Path, broker_id: int) -> Partition:
        log = UnifiedLog(root / f"broker-{broker_id}" / "orders-0")
        return Partition("orders", 0, broker_id, log, replica_lag_time_max_ms=1000)

    def replicate(self, follower: Partition) -> None:
        ldr = self.leader
        ldr.update_follower_fetch_state(
            follower.local_broker_id, follower.log.log_end_offset, self.now
        )
        data = ldr.log.read(follower.log.log_end_offset, 1 << 20).read_bytes()
        follower.append_records_to_follower(data, ldr.log.high_watermark)

    def produce(self, *values: str, acks: int = -1) -> None:
        batch = build_batch([SimpleRecord(v.encode()) for v in values])
        self.leader.append_records_to_leader(batch, required_acks=acks, min_insync_replicas=2)

    def fetch_rounds(self, rounds: int) -> None:
        for _ in range(rounds):
            self.now += 10
            self.replicate(self.f2)
            self.replicate(self.f3)

    def shrink_to_leader_alone(self, rounds: int = 6) -> None:
        for i in range(rounds):  # broker 3 silent, broker 2 keeps up
            self.now += 200
            self.produce(f"r{i}")
            self.replicate(self.f2)
            change = self.leader.maybe_shrink_isr(self.now)
            if change:
                self.leader.apply_isr_change(change.new_isr, self.leader.partition_epoch + 1)
        for _ in range(6):  # broker 2 silent too
            self.now += 300
            change = self.leader.maybe_shrink_isr(self.now)
            if change:
                self.leader.apply_isr_change(change.new_isr, self.leader.partition_epoch + 1)

    def close(self) -> None:
        for p in (self.leader, self.f2, self.f3):
            p.log.close()


@pytest.fixture
def lab(tmp_path):
    lab = ByHand(tmp_path)
    yield lab
    lab.close()


def test_high_watermarks(lab):
    args = (lab.leader, [lab.f2, lab.f3])
    assert checks.high_watermarks([0, 0, 3], *args, records=3, rounds=2, now_ms=lab.now)
    _not_yet(checks.high_watermarks([0, 3, 3], *args), "after round 1", "latest fetch")
    _not_yet(checks.high_watermarks([3, 3, 3], *args), "right after the produce")
    _not_yet(checks.high_watermarks([0, 0], *args), "3 numbers")
    _not_yet(checks.high_watermarks(..., *args), "replace the ...")
    # the notebook's replicas are untouched, and the real run agrees with the check
    assert lab.leader.log.log_end_offset == 0
    lab.produce("a", "b", "c")
    seen = [lab.leader.log.high_watermark]
    for _ in range(2):
        lab.fetch_rounds(1)
        seen.append(lab.leader.log.high_watermark)
    assert seen == [0, 0, 3]
    # from there, one more record and one round is not enough either
    assert checks.high_watermarks([3, 3], lab.leader, [lab.f2, lab.f3], records=1, rounds=1)


def test_isr_shrink(lab):
    lab.produce("a", "b", "c")
    lab.fetch_rounds(2)  # now = 20, both caught up at 20
    args = dict(leader=lab.leader, keeps_up=2, now_ms=lab.now, step_ms=200, rounds=6)
    assert checks.isr_shrink(1220, [1, 2], **args)
    _not_yet(checks.isr_shrink(1020, [1, 2], **args), "strictly more")
    _not_yet(checks.isr_shrink(1220, [1], **args), "stays")
    _not_yet(checks.isr_shrink(..., [1, 2], **args), "replace the ...")
    assert lab.leader.pending_isr is None and lab.leader.isr == [1, 2, 3]


def test_acks_outcomes(lab):
    lab.produce("a", "b", "c")
    lab.fetch_rounds(2)
    right_with_isr_of_3 = {"acks=all": "NONE", "acks=1": "NONE"}
    assert checks.acks_outcomes(right_with_isr_of_3, lab.leader, 2)
    lab.shrink_to_leader_alone()
    assert lab.leader.isr == [1]
    leo = lab.leader.log.log_end_offset
    assert checks.acks_outcomes(
        {"acks=all": "not_enough_replicas", "acks=1": "NONE"}, lab.leader, 2
    )
    _not_yet(checks.acks_outcomes(right_with_isr_of_3, lab.leader, 2), "acks=all", "min.insync")
    _not_yet(
        checks.acks_outcomes({"acks=all": "NOT_ENOUGH_REPLICAS", "acks=1": "X"}, lab.leader, 2),
        "acks=1",
    )
    _not_yet(checks.acks_outcomes({"acks=all": ..., "acks=1": ...}, lab.leader, 2), "replace")
    _not_yet(checks.acks_outcomes(..., lab.leader, 2), "replace the ...")
    assert lab.leader.log.log_end_offset == leo  # the check appended to a copy


def test_unclean_election(lab):
    lab.produce("a", "b", "c")
    lab.fetch_rounds(2)
    lab.shrink_to_leader_alone()
    lab.produce("only-on-the-leader", acks=1)
    lost = lab.leader.log.high_watermark - lab.f2.log.log_end_offset
    assert lost == 1
    assert checks.unclean_election(2, lost, lab.leader, [lab.f2, lab.f3])
    _not_yet(checks.unclean_election(3, lost, lab.leader, [lab.f2, lab.f3]), "first live")
    _not_yet(checks.unclean_election(2, 0, lab.leader, [lab.f2, lab.f3]), "below the old")
    _not_yet(checks.unclean_election(..., ..., lab.leader, [lab.f2, lab.f3]), "replace")


def test_controller_election(tmp_path):
    controller = QuorumController(tmp_path / "controller", session_timeout_ms=1000)
    try:
        epochs = {
            b: controller.register_broker(b, "127.0.0.1", 9090 + b, f"i{b}", 0) for b in (1, 2, 3)
        }
        for b, e in epochs.items():
            controller.heartbeat(b, e, 0)
        controller.create_topic("orders", partitions=1, replication_factor=3)
        p = controller.topics["orders"].partitions[0]
        first, second, third = p.replicas
        assert checks.controller_election(second, 1, controller, "orders", silent=first)
        _not_yet(checks.controller_election(third, 1, controller, "orders", silent=first), "order")
        _not_yet(checks.controller_election(second, 0, controller, "orders", silent=first), "epoch")
        _not_yet(checks.controller_election(..., 1, controller, "orders", silent=first), "replace")
        # the check ran on a copy: the notebook's controller still has its leader, and
        # electing for real gives the check's answer
        assert controller.topics["orders"].partitions[0].leader == first
        controller.fence_broker(first, 10)
        p = controller.topics["orders"].partitions[0]
        assert (p.leader, p.leader_epoch) == (second, 1)
    finally:
        controller.close()


DURABLE = {
    "acks": "all",
    "replication.factor": 3,
    "min.insync.replicas": 2,
    "unclean.leader.election.enable": False,
    "enable.idempotence": True,
}


def test_durable_settings():
    assert checks.durable_settings(DURABLE, brokers=3)
    assert checks.durable_settings({**DURABLE, "acks": -1, "min.insync.replicas": 3}, brokers=3)
    _not_yet(checks.durable_settings({**DURABLE, "acks": "1"}, 3), "acks=1")
    _not_yet(checks.durable_settings({**DURABLE, "min.insync.replicas": 1}, 3), "acks=1 again")
    _not_yet(checks.durable_settings({**DURABLE, "replication.factor": 2}, 3), "two copies")
    _not_yet(checks.durable_settings({**DURABLE, "replication.factor": 5}, 3), "only 3 brokers")
    _not_yet(checks.durable_settings({**DURABLE, "min.insync.replicas": 4}, 3), "refused")
    _not_yet(
        checks.durable_settings({**DURABLE, "unclean.leader.election.enable": "true"}, 3),
        "out-of-sync",
    )
    _not_yet(checks.durable_settings({**DURABLE, "enable.idempotence": False}, 3), "twice")
    both = checks.durable_settings({**DURABLE, "acks": 0, "enable.idempotence": False}, 3)
    _not_yet(both, "acks=0", "twice")  # every wrong setting is explained
    _not_yet(checks.durable_settings({k: ... for k in DURABLE}, 3), "replace")
    _not_yet(checks.durable_settings(..., 3), "replace")
    _not_yet(checks.durable_settings({"acks": "all"}, 3), "give a value")


MODULE = find_check("replication/fenced-leader-epoch").module


def _no_committed_loss(state):
    return all(
        len(state["log"][r]) > offset and state["log"][r][offset] == record
        for offset, record in state["committed"]
        for r in state["quorum"]["isr"]
    )


def test_no_committed_loss():
    assert checks.no_committed_loss(_no_committed_loss, MODULE, walks=3)

    def off_by_one(state):  # the TLA+ index used on a Python list
        return all(
            len(state["log"][r]) > offset + 1 and state["log"][r][offset + 1] == record
            for offset, record in state["committed"]
            for r in state["quorum"]["isr"]
        )

    def every_replica(state):  # not only the controller's ISR
        return all(
            len(log) > offset and log[offset] == record
            for offset, record in state["committed"]
            for log in state["log"].values()
        )

    _not_yet(checks.no_committed_loss(off_by_one, MODULE, walks=3), "sequence from 1")
    _not_yet(checks.no_committed_loss(lambda s: True, MODULE, walks=3), "spec says")
    _not_yet(checks.no_committed_loss(every_replica, MODULE, walks=10), "spec says")
    _not_yet(checks.no_committed_loss(lambda s: s["nope"], MODULE, walks=1), "KeyError")

    def placeholder(state): ...

    _not_yet(checks.no_committed_loss(placeholder, MODULE, walks=1), "returned nothing")
    _not_yet(checks.no_committed_loss(..., MODULE), "replace the ...")


# -- notebook 4: operating through a failure -------------------------------------------------


def test_reassignment_steps():
    right = {
        "replicas": [2, 3, 1],
        "adding": [3],
        "removing": [1],
        "replicas after": [2, 3],
        "isr after": [2, 3],
        "leader after": 2,
    }
    v = checks.reassignment_steps(right, [1, 2], [2, 3], leader=1, isr=[1, 2, 3])
    assert v and "replicas [2, 3, 1]" in str(v)
    _not_yet(
        checks.reassignment_steps({**right, "adding": ...}, [1, 2], [2, 3], 1, [1, 2, 3]),
        "replace the ...",
    )
    _not_yet(checks.reassignment_steps({"replicas": [2, 3]}, [1, 2], [2, 3], 1, [1, 2]), "keys")
    _not_yet(
        checks.reassignment_steps({**right, "replicas": [1, 2, 3]}, [1, 2], [2, 3], 1, [1, 2, 3]),
        "replicas is not",
        "target + removing",
    )
    _not_yet(
        checks.reassignment_steps({**right, "removing": [2]}, [1, 2], [2, 3], 1, [1, 2, 3]),
        "not in the target",
    )
    _not_yet(
        checks.reassignment_steps({**right, "leader after": 3}, [1, 2], [2, 3], 1, [1, 2, 3]),
        "first target replica in the new ISR",
    )
    _not_yet(
        checks.reassignment_steps({**right, "isr after": [1, 2, 3]}, [1, 2], [2, 3], 1, [1, 2, 3]),
        "isr after",
    )
    # a leader that stays keeps leading: broker 2 led [1, 2] moving to [2, 3]
    assert checks.reassignment_steps({**right, "leader after": 2}, [1, 2], [2, 3], 2, [1, 2, 3])
    _not_yet(
        checks.reassignment_steps({**right, "leader after": 3}, [1, 2], [2, 3], 2, [1, 2, 3]),
        "stays keeps leading",
    )
    # the ISR order is the ISR's, either order is right
    assert checks.reassignment_steps({**right, "isr after": [3, 2]}, [1, 2], [2, 3], 1, [1, 2, 3])
    # an ISR that does not complete the move cannot be checked against
    _not_yet(checks.reassignment_steps(right, [1, 2], [2, 3], 1, [1, 2]), "completes")


def _unclean_history():
    """50 records acknowledged by two replicas, 50 more by the leader alone, then
    the stale follower elected: its log (the first 50) is the final log."""
    from kafkalab.cluster.history import History

    h = History()
    for n in range(100):
        value = b"v-%d" % n
        h.send("lossy", 0, value)
        h.ack("lossy", 0, value, n)
    h.send("lossy", 0, b"v-100")  # sent, never acknowledged: not promised
    h.final_log("lossy", 0, [(n, b"v-%d" % n) for n in range(50)])
    return h


def test_unclean_election_cost():
    h = _unclean_history()
    lost = {b"v-%d" % n for n in range(50, 100)}
    v = checks.unclean_election_cost(lost, h)
    assert v and "50 acknowledged" in str(v)
    assert checks.unclean_election_cost(sorted(x.decode() for x in lost), h)  # str values too
    _not_yet(checks.unclean_election_cost(..., h), "replace the ...")
    _not_yet(checks.unclean_election_cost(b"v-50", h), "collection")
    _not_yet(checks.unclean_election_cost(lost | {b"v-100"}, h), "never acknowledged")
    _not_yet(checks.unclean_election_cost(lost | {b"v-1"}, h), "are not lost")
    _not_yet(checks.unclean_election_cost(lost - {b"v-99"}, h), "1 more are lost")
