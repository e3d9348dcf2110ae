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


# -- transactions: Jepsen's anomalies for read_committed readers ------------------------------


def transactional() -> History:
    """t1 commits a0, a1; t2 aborts b0; t3's outcome is unknown (c0). Offsets: a0 0,
    a1 1, COMMIT marker 2, b0 3, ABORT marker 4, c0 5."""
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


def test_a_read_committed_history_without_anomalies_is_valid():
    h = transactional()
    for offset, value in ((0, b"a0"), (1, b"a1"), (5, b"c0")):
        h.read("t", 0, offset, value, reader="rc", isolation="read_committed")
    h.read("t", 0, 3, b"b0", reader="ru")  # read_uncommitted may see aborted records
    h.final_log("t", 0, [(0, b"a0"), (1, b"a1")], isolation="read_committed")
    verdict = check(h)  # c0's transaction may have gone either way
    assert verdict.valid, verdict.summary()
    assert "0 aborted reads, 0 duplicated under read_committed" in verdict.summary()


def test_a_read_committed_reader_returning_an_aborted_record_is_an_aborted_read():
    h = transactional()
    h.read("t", 0, 0, b"a0", reader="rc", isolation="read_committed")
    h.read("t", 0, 3, b"b0", reader="rc", isolation="read_committed")
    verdict = check(h)
    assert not verdict.valid
    assert verdict.aborted_read == [
        {"partition": ("t", 0), "value": b"b0", "offset": 3, "reader": "rc", "transaction": "t2"}
    ]
    assert "1 aborted reads" in verdict.summary()


def test_an_aborted_record_in_the_read_committed_final_log_is_an_aborted_read():
    h = transactional()
    h.final_log("t", 0, [(0, b"a0"), (1, b"a1"), (3, b"b0")], isolation="read_committed")
    verdict = check(h)
    assert [(a["value"], a["reader"]) for a in verdict.aborted_read] == [
        (b"b0", "final read (read_committed)")
    ]


def test_a_committed_record_missing_under_read_committed_is_lost():
    h = transactional()
    h.final_log("t", 0, [(0, b"a0")], isolation="read_committed")  # a1 is gone
    verdict = check(h)
    assert [(x["value"], x["transaction"]) for x in verdict.lost] == [(b"a1", "t1")]


def test_one_record_at_two_offsets_under_read_committed_is_duplicated():
    h = transactional()
    h.read("t", 0, 0, b"a0", reader="c1", isolation="read_committed")
    h.read("t", 0, 0, b"a0", reader="c2", isolation="read_committed")  # same place: fine
    assert check(h).valid
    h.read("t", 0, 6, b"a0", reader="c2", isolation="read_committed")
    verdict = check(h)
    assert verdict.duplicated_committed == [
        {"value": b"a0", "at": [(("t", 0), 0), (("t", 0), 6)], "values": [b"a0", b"a0"],
         "readers": ["c1", "c2"]}
    ]  # fmt: skip


def pipeline(outputs: list[tuple[str, str, bytes, int]], inputs: int = 3) -> History:
    """Inputs i0..i{n-1} in partition in-0; `outputs` are (txn, outcome, input, offset)
    in out-0, each output value `<input>@<txn>`."""
    h = History()
    for i in range(inputs):
        h.send("in", 0, b"i%d" % i)
        h.ack("in", 0, b"i%d" % i, i)
    outcomes = {}
    for txn, outcome, source, offset in outputs:
        value = source + b"@" + txn.encode()
        h.send("out", 0, value, txn=txn, source=("in", 0, source))
        h.ack("out", 0, value, offset)
        outcomes[txn] = outcome
    for txn, outcome in outcomes.items():
        {"commit": h.commit, "abort": h.abort}[outcome](txn)
    return h


def test_an_exactly_once_pipeline_with_a_retried_transaction_is_valid():
    # t1 made i0, i1 and aborted (a crash); t2 made them again and i2, and committed.
    h = pipeline(
        [("t1", "abort", b"i0", 0), ("t1", "abort", b"i1", 1)]
        + [("t2", "commit", b"i0", 3), ("t2", "commit", b"i1", 4), ("t2", "commit", b"i2", 5)]
    )
    h.final_log("out", 0, [(3, b"i0@t2"), (4, b"i1@t2"), (5, b"i2@t2")], isolation="read_committed")
    verdict = check(h)
    assert verdict.valid, verdict.summary()


def test_an_input_processed_twice_is_duplicated_under_read_committed():
    # A zombie's transaction committed too: i1's output is there twice.
    h = pipeline(
        [("t1", "commit", b"i0", 0), ("t1", "commit", b"i1", 1)]
        + [("t2", "commit", b"i1", 3), ("t2", "commit", b"i2", 4)]
    )
    h.final_log(
        "out", 0, [(0, b"i0@t1"), (1, b"i1@t1"), (3, b"i1@t2"), (4, b"i2@t2")],
        isolation="read_committed",
    )  # fmt: skip
    verdict = check(h)
    assert not verdict.valid
    assert verdict.duplicated_committed == [
        {"input": ("in", 0, b"i1"), "at": [(("out", 0), 1), (("out", 0), 3)],
         "values": [b"i1@t1", b"i1@t2"], "readers": ["final read (read_committed)"]}
    ]  # fmt: skip
    assert verdict.aborted_read == [] and verdict.lost == []


def test_an_input_without_a_committed_output_is_lost():
    h = pipeline([("t1", "commit", b"i0", 0), ("t2", "abort", b"i1", 2)])
    h.final_log("out", 0, [(0, b"i0@t1")], isolation="read_committed")
    verdict = check(h)
    assert [x["input"] for x in verdict.lost] == [("in", 0, b"i1"), ("in", 0, b"i2")]


def test_inputs_are_not_judged_before_every_output_partition_is_read():
    h = pipeline([("t1", "commit", b"i0", 0)])
    h.send("out", 1, b"i1@t1", txn="t1", source=("in", 0, b"i1"))
    h.final_log("out", 0, [(0, b"i0@t1")], isolation="read_committed")  # out-1 unread
    assert check(h).lost == []


@given(st.lists(st.sampled_from(["commit", "abort"]), min_size=1, max_size=8), st.data())
def test_every_read_of_an_aborted_transaction_is_found(outcomes, data):
    """Transaction k writes value k at offset 2k (its marker at 2k+1); a
    read_committed reader reads a random subset: exactly the aborted ones it read
    are aborted reads."""
    h = History()
    for k, outcome in enumerate(outcomes):
        h.send("t", 0, b"%d" % k, txn=f"t{k}")
        h.ack("t", 0, b"%d" % k, 2 * k)
        {"commit": h.commit, "abort": h.abort}[outcome](f"t{k}")
    h.final_log("t", 0, [(2 * k, b"%d" % k) for k in range(len(outcomes))])
    read = data.draw(st.sets(st.integers(0, len(outcomes) - 1)))
    for k in sorted(read):
        h.read("t", 0, 2 * k, b"%d" % k, reader="rc", isolation="read_committed")
    verdict = check(h)
    assert sorted(a["offset"] // 2 for a in verdict.aborted_read) == sorted(
        k for k in read if outcomes[k] == "abort"
    )
    assert verdict.valid == all(outcomes[k] == "commit" for k in read)
