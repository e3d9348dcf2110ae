"""Checks for lab 04: leader epochs and where a follower truncates.

Each check works its answer out from the live objects the notebook built: the
replicas' `Partition` objects (their logs and leader-epoch caches), the files a
real broker left on disk, or the TLA+ spec evaluated in the states of a trace.
Nothing here knows the notebook's numbers.

The rule every check turns around (KIP-101, KIP-279, KIP-320): a new follower
asks the leader "where did my latest epoch end?" (OffsetForLeaderEpoch). The
leader answers (E, X): E is the largest epoch it knows that is <= the one asked
about, X where E ends in its log (the start of its next epoch, or its LEO when
E is its latest). The follower cuts at min(X, its own end of E, its LEO). Under
the old rule, `high-watermark`, it asks nothing and cuts at its own HW.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from kafkalab.labs.checks import UNANSWERED, Verdict, answered, compare, run_student_code
from kafkalab.replication.partition import TRUNCATION_RULES, Partition
from kafkalab.storage import UnifiedLog
from kafkalab.storage.checkpoint_file import LeaderEpochCheckpointFile, OffsetCheckpointFile

__all__ = [
    "checkpoint_starts",
    "cut_from_files",
    "first_round",
    "losing_step",
    "offsets_for_epochs",
    "truncation_points",
    "truncation_round_function",
]


def _as_tuple(answer: Any) -> Any:
    return tuple(answer) if isinstance(answer, list | tuple) else answer


# -- the real truncation, run on a copy -----------------------------------------------------


def _fork(partition: Partition, rule: str, directory: Path) -> Partition:
    """A copy of a replica in `directory`, under `rule`: the same batches
    (appended as a follower appends the leader's bytes), the same epoch cache and
    HW, the same role and epochs. The notebook's replica is not touched."""
    source = partition.log
    log = UnifiedLog(directory / source.dir.name)
    if source.log_end_offset > source.log_start_offset:
        log.append_as_follower(source.read(source.log_start_offset, 1 << 24).read_bytes())
    log.leader_epoch_cache.clear()
    for entry in source.leader_epoch_cache.entries:
        log.leader_epoch_cache.assign(entry.epoch, entry.start_offset)
    log.update_high_watermark(source.high_watermark)
    return replace(
        partition,
        log=log,
        truncation_rule=rule,
        replicas=list(partition.replicas),
        isr=list(partition.isr),
        remote={},
    )


def _truncate_copy(follower: Partition, leader: Partition, rule: str) -> tuple[int, list[dict]]:
    """Where `follower` cuts under `rule` when `leader` answers its questions:
    Partition.truncate_by_rule on a copy. Returns (the cut, the rounds)."""
    with tempfile.TemporaryDirectory(prefix="kafkalab-check-") as tmp:
        copy = _fork(follower, rule, Path(tmp))
        try:
            rounds = copy.truncate_by_rule(leader.last_offset_for_leader_epoch)
            return copy.log.log_end_offset, rounds
        finally:
            copy.log.close()


# -- part 1: by hand ------------------------------------------------------------------------

_HINTS = {
    "high-watermark": "under high-watermark the follower asks nothing and cuts at its own HW "
    "(the one it learned from its last fetch answer, not the leader's)",
    "leader-epoch": "under the epoch rules the follower asks where its latest epoch ends; the "
    "leader answers with the start of its next epoch (its LEO if that epoch is its latest) "
    "and the follower cuts at the smaller of that and its own LEO",
}
_HINTS["fenced-leader-epoch"] = _HINTS["leader-epoch"]


def truncation_points(answer: Any, follower: Partition, leader: Partition) -> Verdict:
    """`answer` maps a truncation rule to the offset the follower cuts its log at
    when it becomes the leader's follower. Worked out by running the real
    `Partition.truncate_by_rule` on a copy of the follower, asking the live leader."""
    if not isinstance(answer, Mapping) or not answered(answer) or not answer:
        return (
            UNANSWERED
            if not answered(answer)
            else Verdict(False, "answer with a dict: rule -> offset")
        )
    unknown = [rule for rule in answer if rule not in TRUNCATION_RULES]
    if unknown:
        return Verdict(False, f"{unknown} not a rule; the rules are {', '.join(TRUNCATION_RULES)}")
    wrong, right = [], []
    for rule, offset in answer.items():
        expected, rounds = _truncate_copy(follower, leader, rule)
        asked = [r["asked"] for r in rounds if r["asked"] is not None]
        said = f"{rule}: {expected}" + (
            f" (asked {asked[0]}, the leader answered {rounds[0]['answered']})" if asked else ""
        )
        (right if offset == expected else wrong).append((rule, offset, said))
    if wrong:
        return Verdict(
            False,
            "; ".join(
                f"{rule} does not cut at {offset!r}: {_HINTS[rule]}" for rule, offset, _ in wrong
            ),
        )
    return Verdict(True, "the follower cuts at " + "; ".join(said for *_, said in right))


def first_round(leader_answer: Any, cut_at: Any, follower: Partition, leader: Partition) -> Verdict:
    """The follower's first OffsetForLeaderEpoch round under its own rule: what the
    leader answers (epoch, end offset) and where the follower cuts. The question is
    `follower.epoch_query()`, the answer `leader.last_offset_for_leader_epoch`, the
    cut the real truncation run on a copy of the follower."""
    if not answered(leader_answer, cut_at):
        return UNANSWERED
    question = follower.epoch_query()
    if question is None:
        return Verdict(False, f"under {follower.truncation_rule} this follower asks nothing")
    expected_answer = leader.last_offset_for_leader_epoch(*question)
    expected_cut, _ = _truncate_copy(follower, leader, follower.truncation_rule)
    said = compare(
        _as_tuple(leader_answer),
        expected_answer,
        what=f"the leader's answer to (latest epoch, current epoch) = {question}",
        why="the largest epoch the leader knows <= the one asked, and where it ends in the "
        "leader's log: the start offset of the leader's next epoch",
        hint="look up the follower's latest epoch in the leader's epoch cache: it ends where "
        "the leader's next epoch starts (at the leader's LEO if it is the latest)",
    )
    if not said:
        return said
    cut = compare(
        cut_at,
        expected_cut,
        what="the truncation point",
        why="min(the end the leader answered, the follower's own end of that epoch, its LEO)",
        hint="the follower cuts at the leader's end offset of the epoch, unless its own log "
        "ends earlier",
    )
    if not cut:
        return cut
    return Verdict(True, f"{said.why}; {cut.why}")


def checkpoint_starts(answer: Any, partition_dir: str | Path) -> Verdict:
    """`answer` maps each epoch in the partition's `leader-epoch-checkpoint` file to
    the offset it started at; read with Kafka's file format (version, count, pairs)."""
    if not answered(answer):
        return UNANSWERED
    entries = LeaderEpochCheckpointFile(Path(partition_dir) / "leader-epoch-checkpoint").read()
    expected = dict(entries)
    return compare(
        dict(answer) if isinstance(answer, Mapping) else answer,
        expected,
        what="the map epoch -> start offset",
        why="after the version line (0) and the entry count, each line is `epoch start-offset`; "
        "an epoch in which nothing was written before a newer one began is not in the file",
        hint="skip the first two lines (version, count); each next line is one epoch and the "
        "offset of its first record",
    )


def offsets_for_epochs(answer: Any, leader: Partition) -> Verdict:
    """`answer` maps a requested epoch to the leader's OffsetForLeaderEpoch answer
    (epoch, end offset), worked out by `leader.last_offset_for_leader_epoch`."""
    if not isinstance(answer, Mapping):
        return (
            UNANSWERED
            if not answered(answer)
            else Verdict(False, "answer with a dict: requested epoch -> (epoch, end offset)")
        )
    if not answered(answer):
        return UNANSWERED
    expected = {e: leader.last_offset_for_leader_epoch(e) for e in answer}
    got = {e: _as_tuple(a) for e, a in answer.items()}
    wrong = [e for e in answer if got[e] != expected[e]]
    if wrong:
        return Verdict(
            False,
            f"not the leader's answer for epoch(s) {wrong}: it answers with the largest epoch it "
            "knows <= the one asked (an epoch with no records is not in its cache) and where that "
            "epoch ends: the start offset of its next epoch, or its LEO for its latest epoch",
        )
    return Verdict(
        True,
        "the leader answers "
        + ", ".join(f"{e} -> {expected[e]}" for e in answer)
        + ": the largest known epoch <= the one asked, ending where the next one starts",
    )


# -- part 2: files a real broker left -------------------------------------------------------


def _replica_from_files(
    broker_dir: Path, topic: str, broker_id: int, rule: str, directory: Path
) -> Partition:
    """A replica opened from a copy of a broker's files: its partition directory
    (log, indexes, leader-epoch-checkpoint) and its HW from the broker's
    replication-offset-checkpoint."""
    checkpoint = broker_dir / "replication-offset-checkpoint"
    hw = OffsetCheckpointFile(checkpoint).read().get((topic, 0), 0) if checkpoint.exists() else 0
    source = broker_dir / f"{topic}-0"
    target = directory / f"broker-{broker_id}" / f"{topic}-0"
    target.mkdir(parents=True)
    for f in source.iterdir():
        if f.is_file() and f.name != ".lock":
            target.joinpath(f.name).write_bytes(f.read_bytes())
    log = UnifiedLog(target, high_watermark=hw)
    return Partition(topic, 0, broker_id, log, truncation_rule=rule)


def cut_from_files(
    answer: Any, snapshot: str | Path, topic: str, follower_id: int, leader_id: int
) -> Verdict:
    """`answer` maps a rule to where broker `follower_id` cuts its log when it
    comes back as the follower of `leader_id`, from the brokers' files as they were
    (`snapshot/broker-<id>/`). The check opens copies of those files as real logs,
    makes one the leader in its latest epoch, the other its follower, and runs
    `Partition.truncate_by_rule`."""
    if not isinstance(answer, Mapping) or not answered(answer) or not answer:
        return (
            UNANSWERED
            if not answered(answer)
            else Verdict(False, "answer with a dict: rule -> offset")
        )
    snapshot = Path(snapshot)
    wrong, right = [], []
    for rule, offset in answer.items():
        if rule not in TRUNCATION_RULES:
            return Verdict(False, f"{rule!r} is not a rule: {', '.join(TRUNCATION_RULES)}")
        with tempfile.TemporaryDirectory(prefix="kafkalab-check-") as tmp:
            d = Path(tmp)
            leader = _replica_from_files(
                snapshot / f"broker-{leader_id}", topic, leader_id, rule, d
            )
            follower = _replica_from_files(
                snapshot / f"broker-{follower_id}", topic, follower_id, rule, d
            )
            try:
                epoch = leader.log.leader_epoch_cache.latest_epoch
                members = sorted({leader_id, follower_id})
                leader.make_leader(epoch, [leader_id], members, 0, now_ms=0)
                follower.make_follower(leader_id, epoch, [leader_id], members, 0)
                rounds = follower.truncate_by_rule(leader.last_offset_for_leader_epoch)
                expected = follower.log.log_end_offset
            finally:
                leader.log.close()
                follower.log.close()
        (right if offset == expected else wrong).append((rule, offset, expected, rounds))
    if wrong:
        return Verdict(
            False,
            "; ".join(
                f"{rule} does not cut at {offset!r}: {_HINTS[rule]}" for rule, offset, *_ in wrong
            ),
        )
    return Verdict(
        True,
        "; ".join(
            f"{rule} cuts at {expected}"
            + (f" (asked {r[0]['asked']}, answered {r[0]['answered']})" if r[0]["asked"] else "")
            for rule, _, expected, r in right
        ),
    )


# -- part 3: the spec -----------------------------------------------------------------------


def _no_committed_loss(state: dict) -> bool:
    """The spec's invariant, over a trace state (plain Python):
        NoCommittedLoss == \\A c \\in committed : \\A r \\in quorum.isr :
                               Len(log[r]) > c[1] /\\ log[r][c[1] + 1] = c[2]
    (TLA+ sequences count from 1: the record at offset o is log[r][o + 1])."""
    return all(
        len(state["log"][r]) > offset and state["log"][r][offset] == record
        for offset, record in state["committed"]
        for r in state["quorum"]["isr"]
    )


def losing_step(answer: Any, trace) -> Verdict:
    """The first step of `trace` whose state breaks NoCommittedLoss: a committed
    record missing from a replica in the controller's ISR."""
    if not answered(answer):
        return UNANSWERED
    bad = [step for step, state in enumerate(trace.states) if not _no_committed_loss(state)]
    expected = bad[0] if bad else None
    return compare(
        answer,
        expected,
        what="the first step that breaks NoCommittedLoss",
        why="a committed record is gone from a broker the controller still counts in the ISR: "
        "that broker may be elected, and the record is lost",
        hint="walk down the steps: find the first where a record listed as committed is missing "
        "from the log of some broker in the controller's ISR (look at each ISR member's log)",
    )


def _small_replica(rng: random.Random) -> tuple[list[dict], int, list[dict]]:
    """A replica with up to 3 records and up to 3 epochs out of 0..3, as a spec
    state holds it: (log, HW, epoch cache)."""
    length = rng.randint(0, 3)
    numbers = sorted(rng.sample(range(4), rng.randint(0, 3)))
    starts = sorted(rng.randint(0, length) for _ in numbers)
    cache = [{"epoch": e, "start": s} for e, s in zip(numbers, starts, strict=True)]
    log = [
        {"id": i + 1, "epoch": max([c["epoch"] for c in cache if c["start"] <= i], default=0)}
        for i in range(length)
    ]
    return log, rng.randint(0, length), cache


def _replica(length: int, hw: int, cache: list[tuple[int, int]]) -> tuple:
    entries = [{"epoch": e, "start": s} for e, s in cache]
    log = [
        {"id": i + 1, "epoch": max([e for e, s in cache if s <= i], default=0)}
        for i in range(length)
    ]
    return log, hw, entries


#: KIP-279's case: the follower led epoch 2 (from offset 2), which the leader never had;
#: the leader has epochs 0, 1, 3. Asked about 2, it answers epoch 1; the follower's
#: largest epoch <= 1 is 0, so it cuts where its epoch 0 ends and asks about 0.
_KIP_279 = [_replica(3, 0, [(0, 0), (2, 2)]), _replica(3, 3, [(0, 0), (1, 1), (3, 2)])]


def truncation_round_function(
    function: Callable[..., Any],
    spec,
    traces: Iterable,
    rules: Iterable[str] = TRUNCATION_RULES,
    extra: int = 60,
) -> Verdict:
    """The student's one round of the truncation, `function(leo, hw, epochs, answer)
    -> (offset, done)`, driven round after round as the spec's `Truncation(r, l)`
    drives its `Round`. Every replica seen in the traces (its log, HW and epoch
    cache) is made the follower of every replica seen (its log and cache), under
    every rule, and so is a fixed sample of `extra` small replicas (up to 3
    records, epochs 0..3) the traces never reach: old epochs against new.
    The leader's answers are the spec's `EndOffsetFor` and the right final cut is
    `Truncation(r, l).leo`, both evaluated by the TLA+ evaluator. `epochs` is the
    follower's epoch cache as [(epoch, start offset), ...]; `answer` is None when
    the follower asks nothing (high-watermark, or no epochs)."""
    traces = list(traces)
    if not traces:
        return Verdict(False, "no case to check: pass the traces the notebook loaded")
    views = {}
    for trace in traces:
        for state in trace.states:
            for r in state["log"]:
                view = (state["log"][r], state["hw"][r], state["cache"][r])
                views.setdefault(repr(view), view)
    rng = random.Random(404)  # and a fixed sample of small replicas the traces never reach
    for _ in range(extra):
        view = _small_replica(rng)
        views.setdefault(repr(view), view)
    for view in _KIP_279:
        views.setdefault(repr(view), view)
    f, ldr = "b2", "b1"  # the follower and the leader in the spec's state
    constants = dict(traces[0].meta.get("constants") or {})
    constants["Replicas"] = {f, ldr}
    cases = 0
    for rule in rules:
        constants["TruncationRule"] = rule
        for follower in views.values():
            for leader in views.values():
                state = {
                    "log": {f: follower[0], ldr: leader[0]},
                    "hw": {f: follower[1], ldr: leader[1]},
                    "cache": {f: follower[2], ldr: leader[2]},
                }
                expected = _field(
                    spec.evaluate(f'Truncation("{f}", "{ldr}")', constants=constants, state=state),
                    "leo",
                )
                leo, hw = len(follower[0]), follower[1]
                epochs = [(e["epoch"], e["start"]) for e in follower[2]]
                for _ in range(1 + len(epochs)):
                    latest = epochs[-1][0] if epochs else -1
                    answer = None
                    if rule != "high-watermark" and latest >= 0:
                        answer = tuple(
                            spec.evaluate(
                                f'EndOffsetFor(cache["{ldr}"], Len(log["{ldr}"]), {latest})',
                                constants=constants,
                                state=state,
                            )
                        )
                    result, problem = run_student_code(function, leo, hw, list(epochs), answer)
                    if problem is not None:
                        return problem
                    if not (isinstance(result, tuple | list) and len(result) == 2):
                        return Verdict(False, "return a pair (offset, done)")
                    leo, done = result
                    epochs = [(e, s) for e, s in epochs if s < leo]
                    if done:
                        break
                cases += 1
                if leo != expected:
                    return Verdict(
                        False,
                        f"under {rule}, a follower with log length {len(follower[0])}, HW "
                        f"{follower[1]} and epochs "
                        f"{[(e['epoch'], e['start']) for e in follower[2]]}, asking a leader "
                        f"with log length {len(leader[0])} and epochs "
                        f"{[(e['epoch'], e['start']) for e in leader[2]]}, ends at offset {leo}: "
                        "not where the spec's Truncation cuts. The rule: nothing to ask or an "
                        "answer of -1 -> your HW (capped by your LEO), done; you know no epoch "
                        "<= the answered one -> the leader's end offset, done; your largest "
                        "epoch <= it is an older one (the answered epoch was never yours) -> "
                        "where that older epoch ends for you, ask again; else min(your end, the "
                        "leader's end, your LEO), done",
                    )
    return Verdict(
        True,
        f"your rounds cut where the spec's Truncation does in all {cases} cases (every replica "
        "of the traces and of the sample following every other, under every rule)",
    )


def _field(value: Any, name: str) -> Any:
    """A field of a TLA+ record the evaluator returned (a function value)."""
    from kafkalab.specs.trace import plain

    return plain(value)[name]
