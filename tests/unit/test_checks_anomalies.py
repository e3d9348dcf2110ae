"""kafkalab.labs.checks.anomalies: each check passes a right answer, refuses wrong
ones with a reason, and says "not yet" to the placeholder. The runs are small
hand-built histories of the shapes kafkalab.cluster.losing_settings records."""

from kafkalab.cluster.checker import INFO, OK, Assign, History, Op, Poll, Send, Settings, Subscribe
from kafkalab.cluster.losing_settings import Run
from kafkalab.labs.checks import anomalies as checks

K = ("t", 0)


def _not_yet(v, *words: str) -> None:
    assert not v
    assert str(v).startswith("not yet: ")
    for word in words:
        assert word in str(v), str(v)


def leader_lost() -> Run:
    """acks=1: v0..v3 acknowledged at 0..3; after the failover w0 took offset 2."""
    h = History()
    for o in range(4):
        h.add(Op("p0", OK, [Send(K, b"v%d" % o, o)]))
    h.add(Op("p1", OK, [Send(K, b"w0", 2)]))
    h.add(Op("c0", OK, [Assign((K,))]))
    h.add(Op("c0", OK, [Poll({K: [(0, b"v0"), (1, b"v1"), (2, b"w0")]})]))
    return Run("acks=1", "t", h, Settings(idempotent=False), frozenset())


def crashed() -> Run:
    """auto-commit: c0 processed v0, v1; its poll of v2, v3 crashed; c1 read v4, v5."""
    h = History()
    for o in range(6):
        h.add(Op("p0", OK, [Send(K, b"v%d" % o, o)]))
    h.add(Op("c0", OK, [Subscribe((K,))]))
    h.add(Op("c0", OK, [Poll({K: [(0, b"v0"), (1, b"v1")]})]))
    h.add(Op("c0", INFO, [Poll({K: [(2, b"v2"), (3, b"v3")]})]))
    h.add(Op("c1", OK, [Assign((K,))]))
    h.add(Op("c1", OK, [Poll({K: [(4, b"v4"), (5, b"v5")]})]))
    return Run("auto-commit", "t", h, Settings(subscribe=True), frozenset())


def test_classified():
    runs = {"acks=1": leader_lost(), "auto-commit": crashed()}
    right = {
        "acks=1": {"lost-write", "inconsistent-offsets", "unseen"},
        "auto-commit": {"lost-write", "unseen"},
    }
    v = checks.classified(right, runs)
    assert v and "inconsistent-offsets" in str(v), str(v)
    _not_yet(checks.classified(..., runs), "replace the ...")
    _not_yet(checks.classified({**right, "auto-commit": ...}, runs), "replace the ...")
    _not_yet(checks.classified({"acks=1": right["acks=1"]}, runs), "one entry per run")
    _not_yet(checks.classified({**right, "acks=1": "lost-write"}, runs), "a set of anomaly")
    # the wrong answer a first guess gives: the crash lost nothing in the log, so "unseen"
    _not_yet(checks.classified({**right, "auto-commit": {"unseen"}}, runs), "1 more")
    _not_yet(
        checks.classified({**right, "acks=1": right["acks=1"] | {"duplicate"}}, runs),
        "does not name ['duplicate']",
    )


def test_crash_lost():
    run = crashed()
    v = checks.crash_lost({b"v2", b"v3"}, run)
    assert v and "c1" in str(v) and "2 record" in str(v), str(v)
    assert checks.crash_lost(["v2", "v3"], run)  # str values too
    _not_yet(checks.crash_lost(..., run), "replace the ...")
    _not_yet(checks.crash_lost(b"v2", run), "collection")
    _not_yet(checks.crash_lost({b"v2"}, run), "1 more")
    _not_yet(checks.crash_lost({b"v1", b"v2", b"v3"}, run), "read by an ok poll")
