"""The checker's pictures draw what the verdict says: each process's observations
of a key, the anomalies' offsets, unseen over time."""

import matplotlib

matplotlib.use("Agg")

from kafkalab.cluster.checker import OK, History, Op, Poll, Send, check  # noqa: E402
from kafkalab.viz.checker import key_order_plot, lag_plot, unseen_plot  # noqa: E402

K = ("t", 0)


def lost_write_history() -> History:
    h = History()
    for offset, value in enumerate([b"a", b"b", b"c"]):
        h.add(Op("p0", OK, [Send(K, value, offset)], complete=offset))
    h.add(Op("c1", OK, [Poll({K: [(0, b"a")]})], complete=3))
    h.add(Op("c2", OK, [Poll({K: [(2, b"c")]})], complete=4))
    return h


def test_key_order_marks_the_lost_write_and_each_process_row():
    h = lost_write_history()
    verdict = check(h)
    ax = key_order_plot(h, verdict, K)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["log", "p0", "c1", "c2"]
    # One marker per observation: three sends and two polls (plus the log row).
    per_row = sorted((int(x), int(y)) for c in ax.collections[1:] for x, y in c.get_offsets())
    assert per_row == [(0, 1), (0, 2), (1, 1), (2, 1), (2, 3)]
    labels = {t.get_text(): t.get_position()[0] for t in ax.texts}
    assert labels == {"lost-write\nunseen": 1}  # b at offset 1: lost, and never seen
    assert len(ax.patches) == 1  # the shaded offset


def test_unseen_plot_follows_the_series():
    verdict = check(lost_write_history())
    ax = unseen_plot(verdict)
    (line,) = ax.get_lines()
    assert list(line.get_ydata()) == [1, 2, 3, 2, 1]
    assert "1 at the end" in ax.get_title()


def test_lag_plot_draws_each_process_worst_lag():
    h = History()
    h.add(Op("w", OK, [Send(K, b"a", 0)], complete=1))
    h.add(Op("r", OK, [Poll({K: [(0, b"a")]})], invoke=1.5, complete=2))
    h.add(Op("w", OK, [Send(K, b"b", 1)], complete=3))
    h.add(Op("r", OK, [Poll({})], invoke=4, complete=5))
    ax = lag_plot(check(h))
    (line,) = ax.get_lines()
    assert (list(line.get_xdata()), list(line.get_ydata())) == ([1.5, 4], [0.0, 1.0])
    assert "worst 1" in ax.get_title()


def test_consecutive_offsets_with_the_same_anomalies_are_one_span_and_one_label():
    """acks=1's shape: v0..v5 acknowledged; after the failover w0, w1 took offsets
    2, 3 and a reader read up to 3: two runs (2-3 and 4-5), each named once."""
    h = History()
    for o in range(6):
        h.add(Op("p0", OK, [Send(K, b"v%d" % o, o)]))
    for o, v in ((2, b"w0"), (3, b"w1")):
        h.add(Op("p1", OK, [Send(K, v, o)]))
    h.add(Op("c0", OK, [Poll({K: [(0, b"v0"), (1, b"v1"), (2, b"w0"), (3, b"w1")]})]))
    ax = key_order_plot(h, check(h), K)
    labels = {t.get_text(): t.get_position()[0] for t in ax.texts}
    assert labels == {
        "inconsistent-offsets\nlost-write\nunseen\n(2–3)": 2.5,
        "unseen\n(4–5)": 4.5,
    }
    assert len(ax.patches) == 2
