"""The history checker: every anomaly it names is found, with evidence, and a
correct history passes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkalab.cluster.history import History, check, read_replica_batches
from kafkalab.records import build_batch


def produced(n: int, history: History | None = None) -> History:
    """n sends, each acknowledged at offset i, in order; the final log holds them."""
    h = history or History()
    for i in range(n):
        h.send("t", 0, b"%d" % i)
        h.ack("t", 0, b"%d" % i, i)
    h.final_log("t", 0, [(i, b"%d" % i) for i in range(n)])
    return h


def test_a_correct_history_is_valid():
    h = produced(10)
    h.read("t", 0, 3, b"3")
    verdict = check(h)
    assert verdict.valid, verdict.summary()
    assert verdict.acknowledged == 10


def test_an_acknowledged_record_missing_from_the_final_log_is_lost():
    h = produced(5)
    h.final_log("t", 0, [(0, b"0"), (1, b"1"), (2, b"2")])  # the old leader's tail is gone
    verdict = check(h)
    assert not verdict.valid
    assert [item["value"] for item in verdict.lost] == [b"3", b"4"]
    assert verdict.lost[0]["acked offset"] == 3
    assert "2 lost" in verdict.summary()


def test_a_failed_send_may_or_may_not_be_there():
    h = produced(3)
    h.send("t", 0, b"x")
    h.fail("t", 0, b"x", "MSG_TIMED_OUT")
    assert check(h).valid


def test_duplicates_are_found():
    h = produced(3)
    h.final_log("t", 0, [(0, b"0"), (1, b"1"), (2, b"2"), (3, b"1")])
    verdict = check(h)
    assert verdict.duplicated == [{"partition": ("t", 0), "value": b"1", "offsets": [1, 3]}]


def test_reordering_after_an_acknowledgement_is_found():
    h = History()
    h.send("t", 0, b"a")
    h.ack("t", 0, b"a", 1)
    h.send("t", 0, b"b")  # sent after a was acknowledged...
    h.ack("t", 0, b"b", 0)
    h.final_log("t", 0, [(0, b"b"), (1, b"a")])  # ...yet before it in the log
    verdict = check(h)
    assert len(verdict.reordered) == 1
    assert verdict.reordered[0]["sent later"] == b"b"


def test_concurrent_sends_may_land_in_either_order():
    h = History()
    h.send("t", 0, b"a")
    h.send("t", 0, b"b")
    h.ack("t", 0, b"b", 0)
    h.ack("t", 0, b"a", 1)
    h.final_log("t", 0, [(0, b"b"), (1, b"a")])
    assert check(h).valid


def test_a_record_acknowledged_at_one_offset_and_found_at_another_moved():
    h = produced(2)
    h.final_log("t", 0, [(0, b"0"), (1, b"x"), (2, b"1")])
    verdict = check(h)
    assert verdict.moved == [{"partition": ("t", 0), "value": b"1", "acked at": 1, "now at": [2]}]


def test_a_read_the_final_log_does_not_hold_is_reported():
    h = produced(2)
    h.read("t", 0, 2, b"uncommitted")  # read from a leader that later lost it
    verdict = check(h)
    assert verdict.moved[0]["read at"] == 2 and verdict.moved[0]["final log there"] is None


def test_one_consumer_reading_an_offset_again_or_going_back_is_reordered():
    h = produced(4)
    h.read("t", 0, 1, b"1", reader="c1")
    h.read("t", 0, 2, b"2", reader="c1")
    h.read("t", 0, 0, b"0", reader="c2")  # another consumer: its own order
    h.read("t", 0, 2, b"2", reader="c1")  # c1 reads offset 2 again (a rewind)
    verdict = check(h)
    assert [(r["reader"], r["at"], r["after reading offset"]) for r in verdict.reordered] == [
        ("c1", 2, 2)
    ]
    assert not verdict.valid


def test_one_consumer_skipping_forward_is_in_order():
    h = produced(4)
    h.read("t", 0, 0, b"0", reader="c1")
    h.read("t", 0, 3, b"3", reader="c1")  # a seek forward is no reordering
    assert check(h).valid


def test_replicas_that_differ_below_the_hw_diverged(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
    first = build_batch([b"x"], base_offset=0, partition_leader_epoch=0)
    (a / "00000000000000000000.log").write_bytes(
        first + build_batch([b"y"], base_offset=1, partition_leader_epoch=0)
    )
    (b / "00000000000000000000.log").write_bytes(
        first + build_batch([b"z"], base_offset=1, partition_leader_epoch=1)
    )
    h = produced(0)
    h.replica_batches("t", 0, 1, read_replica_batches(a, below=2))
    h.replica_batches("t", 0, 2, read_replica_batches(b, below=2))
    verdict = check(h)
    assert verdict.diverged[0]["brokers"] == (1, 2)
    assert verdict.diverged[0]["first differing batch"] == 1
    h.replica_batches("t", 0, 2, read_replica_batches(b, below=1))  # only the agreed prefix
    h.replica_batches("t", 0, 1, read_replica_batches(a, below=1))
    assert check(h).valid


@given(st.integers(1, 30), st.data())
def test_dropping_any_acknowledged_record_is_detected(n, data):
    h = produced(n)
    victim = data.draw(st.integers(0, n - 1))
    h.final_log("t", 0, [(i, b"%d" % i) for i in range(n) if i != victim])
    verdict = check(h)
    assert [item["value"] for item in verdict.lost] == [b"%d" % victim]
