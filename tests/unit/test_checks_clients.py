"""The checks of lab 08 part 3 (the clients): right answers pass, wrong ones say
"not yet:" and why, the placeholder asks for an answer. The live objects are built
small, as the notebook builds them: a partition's log, the values in it, histories."""

from pathlib import Path

import pytest

from kafkalab.cluster.history import History
from kafkalab.labs.checks import clients
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.storage import LogConfig, UnifiedLog


def _not_yet(v, *words: str) -> None:
    assert not v
    assert str(v).startswith("not yet: ")
    for word in words:
        assert word in str(v), str(v)


# -- batches_in_log ------------------------------------------------------------------


@pytest.fixture
def partition_dir(tmp_path: Path) -> Path:
    """Batches of 5, 5 and 3 records, as the producer of the notebook's exercise makes."""
    path = tmp_path / "sizes-0"
    log = UnifiedLog(path, LogConfig())
    n = 0
    for size in (5, 5, 3):
        records = [SimpleRecord(b"x" * 700) for _ in range(size)]
        log.append_as_leader(build_batch(records), leader_epoch=0)
        n += size
    log.close()
    return path


def test_batches_in_log_counts_the_batches_in_the_files(partition_dir: Path) -> None:
    v = clients.batches_in_log(3, partition_dir)
    assert v and "5, 5, 3" in str(v)


@pytest.mark.parametrize("wrong", [1, 4, 13])
def test_batches_in_log_wrong_counts_get_the_rule(partition_dir: Path, wrong: int) -> None:
    _not_yet(clients.batches_in_log(wrong, partition_dir), "batch.size", "61 bytes")


def test_batches_in_log_placeholder(partition_dir: Path) -> None:
    _not_yet(clients.batches_in_log(..., partition_dir), "replace the ...")


def test_batches_in_log_of_an_empty_partition_is_zero(tmp_path: Path) -> None:
    assert clients.batches_in_log(0, tmp_path)
    _not_yet(clients.batches_in_log(1, tmp_path))


# -- landing_order -------------------------------------------------------------------

BATCHES = {name: [b"%d" % i for i in range(10 * n, 10 * n + 10)] for n, name in enumerate("ABC")}
REORDERED = BATCHES["B"] + BATCHES["C"] + BATCHES["A"]
IN_ORDER = BATCHES["A"] + BATCHES["B"] + BATCHES["C"]


def test_landing_order_is_read_from_the_log() -> None:
    v = clients.landing_order(["B", "C", "A"], REORDERED, BATCHES)
    assert v and "retried" in str(v)
    assert clients.landing_order(("B", "C", "A"), REORDERED, BATCHES)
    v = clients.landing_order(["A", "B", "C"], IN_ORDER, BATCHES)
    assert v and "OUT_OF_ORDER_SEQUENCE_NUMBER" in str(v)


def test_landing_order_wrong_orders_get_the_reason() -> None:
    _not_yet(clients.landing_order(["A", "B", "C"], REORDERED, BATCHES), "idempotence")
    _not_yet(clients.landing_order(["B", "C", "A"], IN_ORDER, BATCHES), "on the wire")
    _not_yet(clients.landing_order("BCA", REORDERED, BATCHES))


def test_landing_order_placeholder() -> None:
    _not_yet(clients.landing_order(..., REORDERED, BATCHES), "replace the ...")


# -- crash_outcome -------------------------------------------------------------------


def _pipeline(processed: list[int], inputs: int = 6) -> History:
    """Inputs in-0..; the app's outputs out-in-<n>, in the order it wrote them."""
    history = History()
    for n in range(inputs):
        history.send("in", 0, b"in-%d" % n)
        history.ack("in", 0, b"in-%d" % n, offset=n)
    final = []
    for offset, n in enumerate(processed):
        value = b"out-in-%d" % n
        history.send("out", 0, value, source=("in", 0, b"in-%d" % n))
        final.append((offset, value))
    history.final_log("out", 0, final, isolation="read_committed")
    return history


SKIPPED = _pipeline([0, 1, 2, 4, 5])  # 3 committed before processed, then the crash
REPEATED = _pipeline([0, 1, 2, 3, 2, 3, 4, 5])  # 2 and 3 processed, not committed
BOTH = _pipeline([0, 1, 3, 3, 4, 5])
CLEAN = _pipeline([0, 1, 2, 3, 4, 5])


@pytest.mark.parametrize(
    "history, right",
    [(SKIPPED, "lost"), (REPEATED, "duplicated"), (BOTH, "both"), (CLEAN, "neither")],
)
def test_crash_outcome_follows_the_history_checker(history: History, right: str) -> None:
    assert clients.outcome(history) == right
    assert clients.crash_outcome(right, history)
    for wrong in set(clients.OUTCOMES) - {right}:
        _not_yet(clients.crash_outcome(wrong, history), "committed offset")


def test_crash_outcome_refuses_other_words_and_the_placeholder() -> None:
    _not_yet(clients.crash_outcome("lose", SKIPPED), "'lost'")
    _not_yet(clients.crash_outcome(..., SKIPPED), "replace the ...")


# -- reliability_checklist -----------------------------------------------------------


def _lost(n: int) -> History:
    history = History()
    for i in range(n):
        history.send("t", 0, b"v%d" % i)
        history.ack("t", 0, b"v%d" % i, offset=i)
    history.final_log("t", 0, [])
    return history


def _duplicated(n: int) -> History:
    history = History()
    final = []
    for i in range(n):
        history.send("t", 0, b"v%d" % i)
        history.ack("t", 0, b"v%d" % i, offset=i)
        final.append((i, b"v%d" % i))
    history.final_log("t", 0, final + [(n + i, v) for i, (_, v) in enumerate(final)])
    return history


RUNS = {
    "acks=1": _lost(20),
    "unclean": _lost(17),
    "no idempotence": _duplicated(10),
    "auto commit": SKIPPED,
}
SAFE = {
    "acks": "all",
    "min.insync.replicas": 2,
    "unclean.leader.election.enable": False,
    "enable.idempotence": True,
    "commit": "after processing",
}


def test_reliability_checklist_accepts_the_safe_settings() -> None:
    assert clients.reliability_checklist(SAFE, RUNS)
    assert clients.reliability_checklist({**SAFE, "acks": "-1", "min.insync.replicas": 3}, RUNS)
    assert clients.reliability_checklist({**SAFE, "unclean.leader.election.enable": "false"}, RUNS)


@pytest.mark.parametrize(
    "setting, value, evidence",
    [
        ("acks", "1", "20 acknowledged records lost"),
        ("acks", 0, "20 acknowledged records lost"),
        ("min.insync.replicas", 1, "17 acknowledged records lost"),
        ("unclean.leader.election.enable", True, "17 acknowledged records lost"),
        ("enable.idempotence", False, "10 records written twice"),
        ("commit", "auto", "skip"),
        ("commit", "before processing", "1 inputs never processed"),
    ],
)
def test_reliability_checklist_names_each_unsafe_setting_with_its_run(
    setting: str, value, evidence: str
) -> None:
    v = clients.reliability_checklist({**SAFE, setting: value}, RUNS)
    _not_yet(v, f"{setting}={value!r}", evidence)
    for other in set(SAFE) - {setting}:
        assert f"{other}={SAFE[other]!r}:" not in str(v)  # only the unsafe line is named


def test_reliability_checklist_more_in_sync_replicas_than_replicas_refuses_every_write() -> None:
    _not_yet(clients.reliability_checklist({**SAFE, "min.insync.replicas": 4}, RUNS), "refused")


def test_reliability_checklist_wants_every_line_and_known_commits() -> None:
    partial = {k: v for k, v in SAFE.items() if k != "enable.idempotence"}
    _not_yet(clients.reliability_checklist(partial, RUNS), "enable.idempotence")
    _not_yet(clients.reliability_checklist({**SAFE, "commit": "sometimes"}, RUNS), "commit is")
    _not_yet(clients.reliability_checklist(["acks=all"], RUNS), "a dict")
    _not_yet(clients.reliability_checklist(..., RUNS), "replace the ...")
