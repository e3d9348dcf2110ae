"""Today's `History` through the adapter: the kinds of histories the soak and the
fault tests record give the same verdict from `history.check()` and from the new
checker, and the new one names the anomaly."""

from __future__ import annotations

import pytest

from kafkalab.cluster import checker
from kafkalab.cluster.history import History, check


def produced(n: int) -> History:
    """The soak's kind: n acknowledged sends, a consumer's reads, the final log."""
    h = History()
    for i in range(n):
        h.send("t", 0, b"%d" % i)
        h.ack("t", 0, b"%d" % i, i)
    return h


def clean() -> History:
    h = produced(6)
    h.send("t", 0, b"x")
    h.fail("t", 0, b"x", "MSG_TIMED_OUT")  # may or may not be there
    for i in range(6):
        h.read("t", 0, i, b"%d" % i, reader="c1")
    h.final_log("t", 0, [(i, b"%d" % i) for i in range(6)])
    return h


def lost_in_the_middle() -> History:
    h = produced(6)
    h.final_log("t", 0, [(0, b"0"), (1, b"1"), (3, b"3"), (4, b"4"), (5, b"5")])
    return h


def lost_tail() -> History:
    """acks=1 and a leader kill: the new leader never had the tail."""
    h = produced(6)
    h.final_log("t", 0, [(0, b"0"), (1, b"1"), (2, b"2"), (3, b"other")])
    return h


def duplicated() -> History:
    h = produced(3)
    h.final_log("t", 0, [(0, b"0"), (1, b"1"), (2, b"2"), (3, b"1")])
    return h


def reader_going_back() -> History:
    h = produced(3)
    for offset in (0, 1, 2, 1):
        h.read("t", 0, offset, b"%d" % offset, reader="c1")
    h.final_log("t", 0, [(i, b"%d" % i) for i in range(3)])
    return h


def reader_seeking_forward() -> History:
    h = produced(4)
    h.read("t", 0, 0, b"0", reader="c1")
    h.read("t", 0, 3, b"3", reader="c1")
    h.final_log("t", 0, [(i, b"%d" % i) for i in range(4)])
    return h


def transactional() -> History:
    """The fault tests' kind: t1 commits a0, a1 (marker at 2); t2 aborts b0 (marker
    at 4); t3's end is unknown (c0 at 5)."""
    h = History()
    for txn, values, offsets in (("t1", [b"a0", b"a1"], [0, 1]), ("t2", [b"b0"], [3])):
        for value, offset in zip(values, offsets, strict=True):
            h.send("t", 0, value, txn=txn)
            h.ack("t", 0, value, offset)
    h.commit("t1")
    h.abort("t2")
    h.send("t", 0, b"c0", txn="t3")
    h.ack("t", 0, b"c0", 5)
    h.txn_fail("t3", "_TIMED_OUT")
    h.final_log("t", 0, [(0, b"a0"), (1, b"a1"), (3, b"b0"), (5, b"c0")])
    return h


def read_committed_clean() -> History:
    h = transactional()
    for offset, value in ((0, b"a0"), (1, b"a1"), (5, b"c0")):
        h.read("t", 0, offset, value, reader="rc", isolation="read_committed")
    h.read("t", 0, 3, b"b0", reader="ru")  # read_uncommitted may see aborted records
    h.final_log("t", 0, [(0, b"a0"), (1, b"a1")], isolation="read_committed")
    return h


def aborted_read() -> History:
    h = transactional()
    h.read("t", 0, 0, b"a0", reader="rc", isolation="read_committed")
    h.read("t", 0, 3, b"b0", reader="rc", isolation="read_committed")
    return h


def aborted_in_the_committed_final_log() -> History:
    h = transactional()
    h.final_log("t", 0, [(0, b"a0"), (1, b"a1"), (3, b"b0")], isolation="read_committed")
    return h


CASES = [
    (clean, set()),
    (lost_in_the_middle, {"lost-write", "unseen", "int-poll-skip"}),
    (lost_tail, {"inconsistent-offsets", "lost-write", "unseen"}),
    (duplicated, {"duplicate"}),
    (reader_going_back, {"nonmonotonic-poll"}),
    (reader_seeking_forward, {"poll-skip"}),  # found, and allowed: readers may seek
    (transactional, set()),
    (read_committed_clean, set()),
    (aborted_read, {"G1a", "poll-skip"}),
    (aborted_in_the_committed_final_log, {"G1a"}),
]


@pytest.mark.parametrize(("build", "anomalies"), CASES, ids=[c[0].__name__ for c in CASES])
def test_the_same_verdict_both_ways(build, anomalies):
    h = build()
    old = check(h)
    new = checker.check(*checker.from_history(h))
    assert new.valid == old.valid, (old.summary(), new.summary())
    assert set(new.anomalies) == anomalies, new.summary()


def test_the_evidence_names_the_lost_value_and_the_reader_past_it():
    new = checker.check(*checker.from_history(lost_in_the_middle()))
    (case,) = new.anomalies["lost-write"]
    assert (case["value"], case["offset"], case["max read"]) == (b"2", 2, b"5")
    assert case["max reader"][1] == checker.FINAL_READ


def test_an_aborted_read_names_the_transaction_and_the_reader():
    new = checker.check(*checker.from_history(aborted_read()))
    (case,) = new.anomalies["G1a"]
    assert case["value"] == b"b0" and case["writer"][1] == "txn t2" and case["reader"][1] == "rc"


def test_the_adapter_keeps_outcomes():
    ops, settings = checker.from_history(transactional())
    types = {op.process: op.type for op in ops.ops if op.sends()}
    assert types == {"txn t1": checker.OK, "txn t2": checker.FAIL, "txn t3": checker.INFO}
    assert "poll-skip" in settings.allow
