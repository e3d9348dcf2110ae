"""The Jepsen-grade checker: for each anomaly, a small bad history and a clean one,
each asserting the exact anomaly and its evidence."""

from kafkalab.cluster.checker import (
    FAIL,
    INFO,
    OK,
    Assign,
    History,
    Op,
    Poll,
    Send,
    Settings,
    Subscribe,
    check,
    strongly_connected,
)

K = ("t", 0)
X, Y = ("x", 0), ("y", 0)


def history(*ops: Op) -> History:
    h = History()
    for t, op in enumerate(ops):
        op.invoke, op.complete = float(t), float(t) + 0.5
        h.add(op)
    return h


def send(process, value, offset, type=OK, key=K, **kw) -> Op:
    return Op(process, type, [Send(key, value, offset)], **kw)


def poll(process, pairs, type=OK, key=K, **kw) -> Op:
    return Op(process, type, [Poll({key: list(pairs)})], **kw)


ABC = [send("p0", b"a", 0), send("p0", b"b", 1), send("p0", b"c", 2)]


def test_a_clean_history_has_no_anomalies():
    v = check(history(*ABC, poll("p1", [(0, b"a"), (1, b"b"), (2, b"c")])))
    assert v.valid and v.anomalies == {}, v.summary()
    order = v.version_orders[K]
    assert order.by_index == [b"a", b"b", b"c"] and order.offsets == [0, 1, 2]


def test_the_dense_index_skips_offsets_nobody_saw():
    """Control records (transaction markers) take offsets no poll returns."""
    h = history(
        send("p0", b"a", 0), send("p0", b"b", 2), poll("p1", [(0, b"a")]), poll("p1", [(2, b"b")])
    )
    v = check(h)
    assert v.valid, v.summary()
    assert v.version_orders[K].by_offset == {0: 0, 2: 1}


def test_inconsistent_offsets():
    h = history(
        send("p0", b"a", 0),
        send("p9", b"b", None, type=INFO),
        poll("p1", [(0, b"a")]),
        poll("p2", [(0, b"b")]),
    )
    v = check(h)
    assert set(v.anomalies) == {"inconsistent-offsets"} and not v.valid
    assert v.anomalies["inconsistent-offsets"] == [
        {
            "key": K,
            "offset": 0,
            "index": 0,
            "values": [b"a", b"b"],
            "ops": [(0, "p0", b"a"), (2, "p1", b"a"), (3, "p2", b"b")],
        }
    ]


def test_duplicate():
    h = history(
        send("p0", b"a", 0), send("p0", b"b", 1), poll("p1", [(0, b"a"), (1, b"b"), (2, b"a")])
    )
    v = check(h)
    assert set(v.anomalies) == {"duplicate"} and not v.valid, v.summary()
    assert v.anomalies["duplicate"] == [
        {"key": K, "value": b"a", "offsets": [0, 2], "writer": (0, "p0"), "writer type": OK}
    ]


def test_a_duplicate_of_an_unknown_send_is_allowed_without_idempotence():
    """The client retried a send whose outcome it did not know: both copies landed."""
    h = history(send("p0", b"a", None, type=INFO), poll("p1", [(0, b"a"), (1, b"a")]))
    assert not check(h).valid
    v = check(h, Settings(idempotent=False))
    assert set(v.anomalies) == {"duplicate"} and v.valid
    assert v.anomalies["duplicate"][0]["writer type"] == INFO


def test_lost_write():
    h = history(*ABC, poll("p1", [(0, b"a")]), poll("p2", [(2, b"c")]))
    v = check(h)
    assert set(v.anomalies) == {"lost-write", "unseen"} and not v.valid
    assert v.anomalies["lost-write"] == [
        {
            "key": K,
            "value": b"b",
            "offset": 1,
            "index": 1,
            "max read index": 2,
            "max read": b"c",
            "max reader": (4, "p2"),
            "writer": (1, "p0"),
        }
    ]


def test_an_unknown_send_nobody_read_is_not_lost():
    h = history(
        send("p0", b"a", 0),
        send("p0", b"b", 1, type=INFO),
        send("p0", b"c", 2),
        poll("p1", [(0, b"a"), (2, b"c")]),
    )
    v = check(h)
    assert v.valid and v.anomalies == {}, v.summary()


def test_unseen_and_its_series():
    h = history(send("p0", b"a", 0), send("p0", b"b", 1), poll("p1", [(0, b"a")]))
    v = check(h)
    assert set(v.anomalies) == {"unseen"} and not v.valid
    assert v.anomalies["unseen"] == [
        {"key": K, "count": 1, "values": [b"b"], "writers": [(1, "p0")]}
    ]
    assert v.unseen_series == [(0.5, {K: 1}), (1.5, {K: 2}), (2.5, {K: 1})]


def test_g1a_aborted_read():
    h = history(send("p0", b"a", None, type=FAIL), poll("p1", [(0, b"a")]))
    v = check(h)
    assert set(v.anomalies) == {"G1a"} and not v.valid
    assert v.anomalies["G1a"] == [
        {"key": K, "value": b"a", "offset": 0, "writer": (0, "p0"), "reader": (1, "p1")}
    ]


def test_read_uncommitted_may_read_an_aborted_transaction():
    h = history(
        send("p0", b"a", 0, type=FAIL, transactional=True),
        poll("p1", [(0, b"a")], read_committed=False),
    )
    v = check(h)
    assert v.valid and v.anomalies == {}, v.summary()


def test_precommitted_read():
    txn = Op("p0", OK, [Send(K, b"a", 0), Poll({K: [(0, b"a")]})], transactional=True)
    v = check(history(txn))
    assert set(v.anomalies) == {"precommitted-read"} and not v.valid
    assert v.anomalies["precommitted-read"] == [{"key": K, "values": [b"a"], "op": (0, "p0", OK)}]
    clean = Op("p0", OK, [Send(K, b"b", 1), Poll({K: [(0, b"a")]})], transactional=True)
    assert check(history(send("p1", b"a", 0), clean, poll("p2", [(1, b"b")]))).valid


POLL_SKIP = [*ABC, poll("p1", [(0, b"a")]), poll("p1", [(2, b"c")]), poll("p2", [(1, b"b")])]


def test_poll_skip():
    v = check(history(*POLL_SKIP))
    assert set(v.anomalies) == {"poll-skip"} and not v.valid
    assert v.anomalies["poll-skip"] == [
        {
            "key": K,
            "values": [b"a", b"c"],
            "delta": 2,
            "skipped": [b"b"],
            "process": "p1",
            "ops": [3, 4],
        }
    ]


def test_poll_skip_is_allowed_with_subscribe():
    v = check(history(*POLL_SKIP), Settings(subscribe=True))
    assert set(v.anomalies) == {"poll-skip"} and v.valid


def test_an_assign_or_a_rebalance_resets_a_process_position():
    reassigned = [*ABC, poll("p1", [(0, b"a")]), Op("p1", OK, [Assign((X,))])]
    reassigned += [Op("p1", OK, [Assign((K,))]), poll("p1", [(2, b"c")]), poll("p2", [(1, b"b")])]
    assert check(history(*reassigned)).anomalies == {}
    rebalanced = [*ABC, poll("p1", [(0, b"a")])]
    rebalanced += [poll("p1", [(2, b"c")], rebalanced=frozenset({K})), poll("p2", [(1, b"b")])]
    assert check(history(*rebalanced)).anomalies == {}
    # A subscribe to the same key keeps the position: the skip is still seen.
    kept = [*ABC, poll("p1", [(0, b"a")]), Op("p1", OK, [Subscribe((K,))])]
    kept += [poll("p1", [(2, b"c")]), poll("p2", [(1, b"b")])]
    assert set(check(history(*kept)).anomalies) == {"poll-skip"}


def test_read_committed_skips_aborted_records():
    h = history(
        send("p0", b"a", 0),
        send("p0", b"b", 1, type=FAIL, transactional=True),
        send("p0", b"c", 3),
        poll("p1", [(0, b"a")]),
        poll("p1", [(3, b"c")]),
        poll("p2", [(0, b"a"), (1, b"b"), (3, b"c")], read_committed=False),
    )
    v = check(h)
    assert v.valid and v.anomalies == {}, v.summary()


def test_nonmonotonic_poll():
    h = history(*ABC[:2], poll("p1", [(0, b"a"), (1, b"b")]), poll("p1", [(1, b"b")]))
    v = check(h)
    assert set(v.anomalies) == {"nonmonotonic-poll"} and not v.valid
    assert v.anomalies["nonmonotonic-poll"] == [
        {"key": K, "values": [b"b", b"b"], "delta": 0, "process": "p1", "ops": [2, 3]}
    ]


def test_int_poll_skip():
    h = history(*ABC, poll("p1", [(0, b"a"), (2, b"c")]), poll("p2", [(1, b"b")]))
    v = check(h)
    assert set(v.anomalies) == {"int-poll-skip"} and not v.valid
    assert v.anomalies["int-poll-skip"] == [
        {"key": K, "values": [b"a", b"c"], "delta": 2, "skipped": [b"b"], "op": (3, "p1")}
    ]


def test_int_nonmonotonic_poll():
    op = Op("p1", OK, [Poll({K: [(1, b"b")]}), Poll({K: [(0, b"a")]})])
    v = check(history(*ABC[:2], op))
    assert set(v.anomalies) == {"int-nonmonotonic-poll"} and not v.valid
    assert v.anomalies["int-nonmonotonic-poll"] == [
        {"key": K, "values": [b"b", b"a"], "delta": -1, "op": (2, "p1")}
    ]


def test_nonmonotonic_send():
    h = history(send("p0", b"b", 1), send("p0", b"a", 0), poll("p1", [(0, b"a"), (1, b"b")]))
    v = check(h)
    assert set(v.anomalies) == {"nonmonotonic-send"} and not v.valid
    assert v.anomalies["nonmonotonic-send"] == [
        {"key": K, "values": [b"b", b"a"], "delta": -1, "process": "p0", "ops": [0, 1]}
    ]
    # Two producers may interleave any way.
    h = history(send("p0", b"b", 1), send("p9", b"a", 0), poll("p1", [(0, b"a"), (1, b"b")]))
    assert check(h).anomalies == {}


def test_int_send_skip_is_allowed():
    txn = Op("p0", OK, [Send(K, b"a", 0), Send(K, b"c", 2)], transactional=True)
    h = history(txn, send("p1", b"b", 1), poll("p2", [(0, b"a"), (1, b"b"), (2, b"c")]))
    v = check(h)
    assert set(v.anomalies) == {"int-send-skip"} and v.valid
    assert v.anomalies["int-send-skip"] == [
        {"key": K, "values": [b"a", b"c"], "delta": 2, "skipped": [b"b"], "op": (0, "p0")}
    ]


def test_int_nonmonotonic_send():
    txn = Op("p0", OK, [Send(K, b"b", 1), Send(K, b"a", 0)], transactional=True)
    v = check(history(txn, poll("p2", [(0, b"a"), (1, b"b")])))
    assert set(v.anomalies) == {"int-nonmonotonic-send"} and not v.valid
    assert v.anomalies["int-nonmonotonic-send"] == [
        {"key": K, "values": [b"b", b"a"], "delta": -1, "op": (0, "p0")}
    ]


def test_g0_write_cycle_found_and_allowed():
    """T1 writes x before T2, T2 writes y before T1: writes are not isolated."""
    t1 = Op("t1", OK, [Send(X, b"x1", 0), Send(Y, b"y1", 1)], transactional=True)
    t2 = Op("t2", OK, [Send(X, b"x2", 1), Send(Y, b"y2", 0)], transactional=True)
    reader = Op("r", OK, [Poll({X: [(0, b"x1"), (1, b"x2")], Y: [(0, b"y2"), (1, b"y1")]})])
    h = history(t1, t2, reader)
    assert check(h).anomalies == {}  # without write-write inference, no edges between writers
    v = check(h, Settings(ww_deps=True))
    assert set(v.anomalies) == {"G0"} and v.valid
    assert v.anomalies["G0"] == [
        {
            "ops": [0, 1],
            "cycle": [
                {"from": (0, "t1"), "to": (1, "t2"), "dependency": "ww", "key": X, "value": b"x2"},
                {"from": (1, "t2"), "to": (0, "t1"), "dependency": "ww", "key": Y, "value": b"y1"},
            ],
        }
    ]


def test_g1c_write_read_cycle():
    """T1 read what T2 wrote and T2 read what T1 wrote: each saw the other's
    uncommitted write."""
    t1 = Op("t1", OK, [Send(X, b"x1", 0), Poll({Y: [(0, b"y1")]})], transactional=True)
    t2 = Op("t2", OK, [Send(Y, b"y1", 0), Poll({X: [(0, b"x1")]})], transactional=True)
    v = check(history(t1, t2))
    assert set(v.anomalies) == {"G1c"} and not v.valid
    assert v.anomalies["G1c"] == [
        {
            "ops": [0, 1],
            "cycle": [
                {"from": (0, "t1"), "to": (1, "t2"), "dependency": "wr", "key": X, "value": b"x1"},
                {"from": (1, "t2"), "to": (0, "t1"), "dependency": "wr", "key": Y, "value": b"y1"},
            ],
        }
    ]
    # One way only: T2 read T1's committed write; no cycle.
    t2 = Op("t2", OK, [Send(Y, b"y1", 0), Poll({X: [(0, b"x1")]})], transactional=True)
    t1 = Op("t1", OK, [Send(X, b"x1", 0)], transactional=True)
    assert check(history(t1, t2, poll("r", [(0, b"y1")], key=Y))).anomalies == {}


def test_tarjan_finds_each_component():
    edges = [(1, 2), (2, 3), (3, 1), (3, 4), (4, 5), (5, 4), (6, 6)]
    assert sorted(map(sorted, strongly_connected(edges))) == [[1, 2, 3], [4, 5]]


def test_a_failed_op_is_not_in_the_graph():
    t1 = Op("t1", FAIL, [Send(X, b"x1", 0), Poll({Y: [(0, b"y1")]})], transactional=True)
    t2 = Op("t2", OK, [Send(Y, b"y1", 0), Poll({X: [(0, b"x1")]})], transactional=True)
    v = check(history(t1, t2, poll("r", [(0, b"y1")], key=Y)))
    assert set(v.anomalies) == {"G1a"}  # t2 read an aborted write; no cycle


def test_an_unknown_transaction_proven_committed_by_a_read_can_lose_its_other_write():
    """One of its sends was read, so it committed: its other send must be there."""
    unknown = Op("p9", INFO, [Send(K, b"b", 1), Send(K, b"c", 2)], transactional=True)
    h = history(
        send("p0", b"a", 0),
        unknown,
        send("p0", b"d", 3),
        poll("p1", [(0, b"a"), (1, b"b"), (3, b"d")]),
    )
    v = check(h)
    assert set(v.anomalies) == {"lost-write", "int-poll-skip"} and not v.valid
    assert [(c["value"], c["writer"]) for c in v.anomalies["lost-write"]] == [(b"c", (1, "p9"))]
    assert v.anomalies["int-poll-skip"][0]["skipped"] == [b"c"]
    # Nobody read either of its sends: it may never have committed; nothing is lost.
    h = history(
        send("p0", b"a", 0), unknown, send("p0", b"d", 3), poll("p1", [(0, b"a"), (3, b"d")])
    )
    assert check(h).anomalies == {}


def test_realtime_lag_after_jepsens_example():
    """A poll that saw the latest write has lag 0; a poll beginning at 4 that sees
    nothing new, when offset 1 was known to exist at 3, is at least 1 behind."""
    h = History()
    h.add(Op("w", OK, [Send(K, b"a", 0)], invoke=0.5, complete=1))
    h.add(Op("r", OK, [Poll({K: [(0, b"a")]})], invoke=1.5, complete=2))
    h.add(Op("w", OK, [Send(K, b"b", 1)], invoke=2.5, complete=3))
    h.add(Op("r", OK, [Poll({})], invoke=4, complete=5))
    v = check(h)
    assert v.lag_series == [
        {"time": 1.5, "process": "r", "key": K, "lag": 0.0},
        {"time": 4, "process": "r", "key": K, "lag": 1.0},
    ]


def test_an_assign_starts_new_keys_from_the_beginning_and_subscribe_forgets():
    h = History()
    h.add(Op("w", OK, [Send(K, b"a", 0)], complete=1))
    h.add(Op("r", OK, [Assign((K,)), Poll({})], invoke=3, complete=4))
    h.add(Op("r", OK, [Subscribe((K,)), Poll({})], invoke=5, complete=6))
    v = check(h)
    assert v.lag_series == [{"time": 3, "process": "r", "key": K, "lag": 2.0}]
