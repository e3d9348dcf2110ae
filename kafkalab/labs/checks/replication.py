"""Checks for lab 03 (replication): the high watermark, the ISR, acks and
min.insync.replicas, elections, durable settings, and an invariant of the spec.

Each check works its answer out from the objects the notebook built. Checks on
``Partition`` objects run the real code on *copies* of the notebook's replicas
(their logs copied into a temporary directory), so the notebook's own replicas
are not touched and the cells after a check still show what they showed before.
"""

from __future__ import annotations

import copy
import dataclasses
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkalab.errors import Errors, KafkaError
from kafkalab.labs.checks import UNANSWERED, Verdict, answered, run_student_code, verdict
from kafkalab.records import SimpleRecord, build_batch
from kafkalab.replication.partition import Partition
from kafkalab.storage import UnifiedLog

__all__ = [
    "acks_outcomes",
    "controller_election",
    "durable_settings",
    "high_watermarks",
    "isr_shrink",
    "no_committed_loss",
    "reassignment_steps",
    "unclean_election",
    "unclean_election_cost",
]

# -- copies of the notebook's replicas -------------------------------------------------------


def _copy_replica(p: Partition, directory: Path) -> Partition:
    """The same replica on a copy of its log: same records, HW, role, ISR and
    what the leader knows of its followers."""
    log = UnifiedLog(directory / f"broker-{p.local_broker_id}" / p.log.dir.name, p.log.config)
    while log.log_end_offset < p.log.log_end_offset:
        log.append_as_follower(p.log.read(log.log_end_offset, 1 << 20).read_bytes())
    log.update_high_watermark(p.log.high_watermark)
    return dataclasses.replace(
        p,
        log=log,
        replicas=list(p.replicas),
        isr=list(p.isr),
        pending_isr=None if p.pending_isr is None else list(p.pending_isr),
        remote=copy.deepcopy(p.remote),
    )


def _fetch(leader: Partition, follower: Partition, now_ms: int) -> None:
    """One fetch, as the notebook's replicate(): the leader notes the follower's
    fetch offset as its LEO, answers with the records from there and its HW."""
    leader.update_follower_fetch_state(
        follower.local_broker_id, follower.log.log_end_offset, now_ms
    )
    data = leader.log.read(follower.log.log_end_offset, 1 << 20).read_bytes()
    follower.append_records_to_follower(data, leader.log.high_watermark)


# -- notebook 1: by hand ---------------------------------------------------------------------


def high_watermarks(
    answer: Any,
    leader: Partition,
    followers: list[Partition],
    records: int = 3,
    rounds: int = 2,
    now_ms: int = 0,
    step_ms: int = 10,
) -> Verdict:
    """The leader's HW right after a produce of ``records`` records, then after
    each of ``rounds`` rounds of fetches (every follower fetches once a round,
    in order). Rule: HW = the smallest LEO over the ISR, where the leader knows
    a follower's LEO only from the offset that follower fetches from *next*."""
    if not answered(answer):
        return UNANSWERED
    with tempfile.TemporaryDirectory(prefix="kafkalab-check-") as tmp:
        ldr = _copy_replica(leader, Path(tmp))
        fols = [_copy_replica(f, Path(tmp)) for f in followers]
        try:
            batch = build_batch([SimpleRecord(b"r%d" % i) for i in range(records)])
            ldr.append_records_to_leader(batch, required_acks=1, min_insync_replicas=1)
            expected = [ldr.log.high_watermark]
            for n in range(1, rounds + 1):
                for f in fols:
                    _fetch(ldr, f, now_ms + n * step_ms)
                expected.append(ldr.log.high_watermark)
        finally:
            for p in [ldr, *fols]:
                p.log.close()
    labels = ["right after the produce"] + [f"after round {n}" for n in range(1, rounds + 1)]
    why = (
        "the produce moves only the leader's LEO; in the first round the followers fetch "
        "from their old LEO, so the leader still believes they lack the records; only the "
        "next fetch offsets tell it they have them, and then the HW, the smallest LEO over "
        "the ISR, moves"
    )
    try:
        given = [int(v) for v in answer]
    except (TypeError, ValueError):
        return Verdict(False, f"give a list of {len(expected)} numbers, one per moment: {labels}")
    if len(given) != len(expected):
        return Verdict(False, f"give {len(expected)} numbers, one per moment: {labels}")
    for label, got, want in zip(labels, given, expected, strict=True):
        if got != want:
            return Verdict(
                False,
                f"the HW {label} is not {got}: the HW is the smallest LEO over the ISR, and "
                "the leader knows a follower's LEO only from the offset of that follower's "
                "latest fetch (a fetch says what the follower had *before* the answer)",
            )
    return Verdict(True, f"the leader's HW goes {expected}: {why}")


def isr_shrink(
    shrink_at_ms: Any,
    isr_after: Any,
    leader: Partition,
    keeps_up: int,
    now_ms: int,
    step_ms: int,
    rounds: int,
) -> Verdict:
    """When (t = now_ms + k * step_ms, k = 1..rounds) the leader first proposes a
    smaller ISR, and which, while broker ``keeps_up`` fetches up to the LEO every
    round and the others are silent. Rule (Kafka's maybeShrinkIsr): a follower
    leaves when now - its last caught-up time is *more than*
    replica.lag.time.max.ms. Worked out with the real maybe_shrink_isr on a copy."""
    if not answered(shrink_at_ms, isr_after):
        return UNANSWERED
    expected = None
    for k in range(1, rounds + 1):
        t = now_ms + k * step_ms
        shadow = dataclasses.replace(
            leader, isr=list(leader.isr), pending_isr=None, remote=copy.deepcopy(leader.remote)
        )
        shadow.remote[keeps_up].last_caught_up_time_ms = t
        change = shadow.maybe_shrink_isr(t)
        if change is not None:
            expected = (t, sorted(change.new_isr))
            break
    if expected is None:
        return Verdict(False, f"this check found no shrink within {rounds} rounds")
    caught_up = {b: r.last_caught_up_time_ms for b, r in sorted(leader.remote.items())}
    rule = (
        f"a follower leaves once now - its last caught-up time > "
        f"replica.lag.time.max.ms = {leader.replica_lag_time_max_ms} ms (strictly more); "
        f"the leader's last caught-up times are {caught_up}"
    )
    try:
        given = (int(shrink_at_ms), sorted(isr_after))
    except (TypeError, ValueError):
        return Verdict(False, "shrink_at_ms is a time in ms, isr_after a list of broker ids")
    if given[0] != expected[0]:
        return Verdict(
            False,
            f"the leader does not propose the shrink at t={given[0]} ms: {rule}; the loop "
            f"looks at t = {now_ms} + {step_ms} x round",
        )
    if given[1] != expected[1]:
        return Verdict(
            False,
            f"the proposed ISR is not {given[1]}: only followers that have not caught up "
            "to the leader's LEO for too long leave; one that fetches every round stays",
        )
    return Verdict(True, f"at t={expected[0]} ms the leader proposes ISR {expected[1]}: {rule}")


def _error_name(answer: Any) -> str:
    if isinstance(answer, Errors):
        return answer.name
    return str(answer).strip().upper()


def acks_outcomes(answer: Any, leader: Partition, min_insync_replicas: int) -> Verdict:
    """What a produce with acks=all and with acks=1 gets from this leader now:
    Kafka's error name, "NONE" for success. Rule (appendRecordsToLeader): acks=all
    is refused *before* the append when the ISR is smaller than
    min.insync.replicas; acks=1 needs only the leader. Worked out by appending to
    a copy of the leader."""
    if not isinstance(answer, dict):
        return UNANSWERED if not answered(answer) else Verdict(False, "give a dict")
    if not answered(*answer.values()):
        return UNANSWERED
    expected = {}
    with tempfile.TemporaryDirectory(prefix="kafkalab-check-") as tmp:
        ldr = _copy_replica(leader, Path(tmp))
        try:
            for key, acks in (("acks=all", -1), ("acks=1", 1)):
                try:
                    ldr.append_records_to_leader(
                        build_batch([SimpleRecord(b"x")]), acks, min_insync_replicas
                    )
                    expected[key] = Errors.NONE.name
                except KafkaError as e:
                    expected[key] = e.code.name
        finally:
            ldr.log.close()
    why = (
        f"the ISR is {leader.isr} and min.insync.replicas is {min_insync_replicas}: acks=all "
        "is refused before the append when the ISR is smaller, acks=1 only needs the leader"
    )
    for key in ("acks=all", "acks=1"):
        if key not in answer:
            return Verdict(False, f'give an answer for "{key}" (an error name, "NONE" if it works)')
        got = _error_name(answer[key])
        if got != expected[key]:
            return Verdict(
                False,
                f"{key} does not get {got}: compare the ISR with min.insync.replicas, and "
                "remember which acks setting looks at min.insync.replicas at all",
            )
    return Verdict(
        True, f"acks=all gets {expected['acks=all']}, acks=1 gets {expected['acks=1']}: {why}"
    )


def _controller_copy(controller: Any, directory: Path):
    """The controller replayed from a copy of its metadata log."""
    from kafkalab.controller.quorum_controller import QuorumController

    controller.log.flush()
    shutil.copytree(controller.log.dir, directory / controller.log.dir.name)
    return QuorumController(
        directory,
        session_timeout_ms=controller.session_timeout_ms,
        unclean_leader_election_enable=controller.unclean_default,
    )


def controller_election(
    new_leader: Any, leader_epoch: Any, controller: Any, topic: str, silent: int
) -> Verdict:
    """Which broker the controller elects for partition 0 of ``topic`` when broker
    ``silent`` is fenced, and the new leader epoch. Rule: the first replica in the
    assignment order that is alive and in the ISR; a new leader bumps the leader
    epoch by one. Worked out on a copy of the controller (its metadata log)."""
    if not answered(new_leader, leader_epoch):
        return UNANSWERED
    with tempfile.TemporaryDirectory(prefix="kafkalab-check-") as tmp:
        shadow = _controller_copy(controller, Path(tmp))
        try:
            before = copy.deepcopy(shadow.topics[topic].partitions[0])
            shadow.fence_broker(silent, 0)
            after = shadow.topics[topic].partitions[0]
            expected = (after.leader, after.leader_epoch)
        finally:
            shadow.close()
    why = (
        f"replicas {before.replicas}, ISR {before.isr}: without broker {silent} the first "
        f"replica in that order still in the ISR leads, and the leader epoch goes from "
        f"{before.leader_epoch} to {expected[1]}"
    )
    if new_leader != expected[0]:
        return Verdict(
            False,
            f"broker {new_leader} is not elected: the controller takes the first replica, in "
            "the order the topic's assignment lists them, that is alive and in the ISR",
        )
    if leader_epoch != expected[1]:
        return Verdict(
            False,
            f"the leader epoch is not {leader_epoch}: every change of leader adds one to it "
            "(an ISR change alone moves the partition epoch only)",
        )
    return Verdict(True, f"broker {expected[0]} leads in epoch {expected[1]}: {why}")


def unclean_election(
    new_leader: Any, lost: Any, leader: Partition, followers: list[Partition]
) -> Verdict:
    """If ``leader`` died now and the controller elected uncleanly: who leads, and
    how many committed records (below the old leader's HW) are lost? Rule: with
    no live ISR member, unclean.leader.election.enable=true lets the first live
    replica in the assignment order lead, ISR or not; its log becomes the
    partition's, and the others truncate to it. Worked out with the real
    QuorumController on the leader's replicas and ISR."""
    if not answered(new_leader, lost):
        return UNANSWERED
    from kafkalab.controller.quorum_controller import QuorumController

    with tempfile.TemporaryDirectory(prefix="kafkalab-check-") as tmp:
        c = QuorumController(Path(tmp), unclean_leader_election_enable=True)
        try:
            epochs = {
                b: c.register_broker(b, "127.0.0.1", 9090 + b, f"i{b}", 0) for b in leader.replicas
            }
            for b, e in epochs.items():
                c.heartbeat(b, e, 0)
            c.create_topic("t", 1, len(leader.replicas), assignments={0: list(leader.replicas)})
            p = c.topics["t"].partitions[0]
            if sorted(leader.isr) != sorted(p.isr):
                c.alter_partition(
                    p.leader,
                    epochs[p.leader],
                    "t",
                    0,
                    p.leader_epoch,
                    p.partition_epoch,
                    list(leader.isr),
                )
            c.fence_broker(leader.local_broker_id, 0)
            elected = c.topics["t"].partitions[0].leader
        finally:
            c.close()
    by_id = {f.local_broker_id: f for f in followers}
    hw = leader.log.high_watermark
    kept = min(hw, by_id[elected].log.log_end_offset)
    expected = (elected, hw - kept)
    why = (
        f"ISR {leader.isr} dies with broker {leader.local_broker_id}; broker {elected} is the "
        f"first live replica of {leader.replicas}, with LEO {by_id[elected].log.log_end_offset} "
        f"against the old leader's HW {hw}"
    )
    if new_leader != expected[0]:
        return Verdict(
            False,
            f"broker {new_leader} is not elected: with no live ISR member, an unclean election "
            "takes the first live replica in the assignment order, in the ISR or not",
        )
    if lost != expected[1]:
        return Verdict(
            False,
            f"not {lost} records: count the offsets below the old leader's HW (committed) that "
            "the new leader does not have; the new leader's log becomes the partition's",
        )
    return Verdict(
        True, f"broker {expected[0]} leads and {expected[1]} committed record(s) are lost: {why}"
    )


# -- notebook 2: on a cluster ----------------------------------------------------------------


def durable_settings(settings: Any, brokers: int) -> Verdict:
    """Settings under which no acknowledged record is lost, nor written twice, when
    one broker fails at any moment, on a cluster of ``brokers`` brokers. The
    rules, each a reason a record can go:

    - acks=all: the leader answers once every ISR member has the record (acks=1
      answers when only the leader has it; acks=0 never waits).
    - replication.factor >= 3 and no more than the brokers: a copy to lose and still
      have two.
    - 2 <= min.insync.replicas <= replication.factor: acks=all with an ISR of one
      is acks=1 again (and more than the replicas refuses every write).
    - unclean.leader.election.enable=false: an out-of-sync replica never leads.
    - enable.idempotence=true: a retried batch is written once and in order.
    """
    if not isinstance(settings, dict):
        return UNANSWERED if not answered(settings) else Verdict(False, "give a dict")
    if not answered(*settings.values()):
        return UNANSWERED
    keys = (
        "acks",
        "replication.factor",
        "min.insync.replicas",
        "unclean.leader.election.enable",
        "enable.idempotence",
    )
    missing = [k for k in keys if k not in settings]
    if missing:
        return Verdict(False, f"give a value for {', '.join(missing)}")

    def flag(value: Any) -> bool | None:
        text = str(value).strip().lower()
        return {"true": True, "false": False}.get(text)

    wrong = []
    acks = str(settings["acks"]).strip().lower()
    if acks not in ("all", "-1"):
        wrong.append(
            f"acks={acks} answers before every in-sync replica has the record: a leader that "
            "dies then takes it along"
        )
    try:
        rf, min_isr = int(settings["replication.factor"]), int(settings["min.insync.replicas"])
    except (TypeError, ValueError):
        return Verdict(False, "replication.factor and min.insync.replicas are numbers")
    if rf < 3:
        wrong.append(
            f"replication.factor={rf}: with one broker down there must still be two copies"
        )
    if rf > brokers:
        wrong.append(f"replication.factor={rf}: this cluster has only {brokers} brokers")
    if min_isr < 2:
        wrong.append(
            f"min.insync.replicas={min_isr}: acks=all with an ISR of the leader alone is "
            "acks=1 again"
        )
    if min_isr > rf:
        wrong.append(f"min.insync.replicas={min_isr} > replication.factor: every write refused")
    if flag(settings["unclean.leader.election.enable"]) is not False:
        wrong.append(
            "unclean.leader.election.enable must be false: an out-of-sync replica elected "
            "leader drops what it lacks"
        )
    if flag(settings["enable.idempotence"]) is not True:
        wrong.append(
            "enable.idempotence must be true: without it a retried batch can be written "
            "twice, or after a later one"
        )
    if wrong:
        return Verdict(False, "; ".join(wrong))
    spare = (
        " (with min.insync.replicas = replication.factor no broker may be down for writes to "
        "go on: safe, but any failure stops producers)"
        if min_isr == rf
        else f" and writes go on with {rf - min_isr} broker(s) down"
    )
    return Verdict(
        True,
        f"acks=all, RF {rf}, min.insync.replicas {min_isr}, no unclean elections, idempotence: "
        f"every acknowledged record is on at least {min_isr} replicas, only those can lead, "
        f"and retries write nothing twice{spare}",
    )


# -- notebook 3: the spec --------------------------------------------------------------------


def no_committed_loss(
    predicate: Callable[[dict], Any],
    module: str | Path,
    walks: int = 10,
    steps: int = 20,
    counterexample_checks: tuple[str, ...] = ("replication/high-watermark",),
) -> Verdict:
    """The student's ``predicate(state) -> bool`` must agree with the spec's own
    ``NoCommittedLoss``, evaluated by the built-in TLA+ evaluator, on every state
    of some random walks through ``module`` and of the counterexamples the
    checker finds for the older truncation rules (where it is false)."""
    from kafkalab.specs.runner import run_check
    from kafkalab.specs.tla import load_module, solve_constants
    from kafkalab.specs.tla.itf import itf_from_json
    from kafkalab.specs.trace import plain

    if predicate is ... or not callable(predicate):
        return UNANSWERED
    states: list[tuple[Any, dict, dict]] = []  # (module, constants, raw state)
    mod = load_module(str(module))
    constants = solve_constants(mod, "ConstInit", None)
    for seed in range(walks):
        rng = random.Random(seed)
        state = rng.choice(mod.initial_states("Init", constants))
        states.append((mod, constants, state))
        for _ in range(steps):
            options = mod.successors(state, "Next", constants)
            if not options:
                break
            state = rng.choice(options)[1]
            states.append((mod, constants, state))
    for name in counterexample_checks:
        result = run_check(name)
        cmod = load_module(str(result.check.module))
        cconst = solve_constants(cmod, "ConstInit", None)
        for state in itf_from_json(result.counterexample)["states"]:
            states.append((cmod, cconst, state))
    held = broke = 0
    for m, c, state in states:
        spec_says = bool(m.evaluate("NoCommittedLoss", c, state))
        view = {k: plain(v) for k, v in state.items()}
        got, problem = run_student_code(predicate, copy.deepcopy(view))
        if problem is not None:
            return problem
        if bool(got) != spec_says:
            return Verdict(
                False,
                f"on a state where the spec says NoCommittedLoss is {spec_says}, yours says "
                f"{bool(got)}: committed {view['committed']}, the controller's ISR "
                f"{view['quorum']['isr']}, logs {view['log']} (offsets count from 0, "
                "a TLA+ sequence from 1)",
            )
        held, broke = held + spec_says, broke + (not spec_says)
    return verdict(
        broke > 0,
        f"your predicate agrees with the spec's NoCommittedLoss on all {held + broke} states "
        f"({held} where it holds, {broke} from counterexamples where it breaks): every "
        "committed (offset, record) is at that offset on every member of the controller's ISR",
        "the states checked never broke the invariant, so this check proves nothing",
    )


# -- notebook 4: operating through a failure ---------------------------------------------


def reassignment_steps(
    answer: Any, current: list[int], target: list[int], leader: int, isr: list[int]
) -> Verdict:
    """A partition on ``current`` (led by ``leader``) moved to ``target``: its replicas,
    adding and removing lists while it moves, then, once the ISR is ``isr``, its
    replicas, ISR and leader. ``answer`` is a dict with the keys "replicas",
    "adding", "removing", "replicas after", "isr after", "leader after". Worked out
    with the controller's own PartitionReassignmentReplicas (KIP-455)."""
    from kafkalab.controller.partition_reassignment import PartitionReassignmentReplicas

    keys = ("replicas", "adding", "removing", "replicas after", "isr after", "leader after")
    if not isinstance(answer, dict) or set(answer) != set(keys):
        return Verdict(False, f"answer a dict with exactly the keys {list(keys)}")
    if not answered(answer):
        return UNANSWERED
    moving = PartitionReassignmentReplicas.of(current, target)
    done = moving.completed(isr)
    if done is None:
        return Verdict(False, f"the check needs an ISR that completes the move, not {isr}")
    replicas_after, isr_after = done
    leader_after = leader if leader in replicas_after else next(r for r in target if r in isr_after)
    expected = {
        "replicas": moving.replicas,
        "adding": moving.adding,
        "removing": moving.removing,
        "replicas after": replicas_after,
        "isr after": isr_after,
        "leader after": leader_after,
    }
    rules = {
        "replicas": "while it moves the partition has the target replicas, then the leaving "
        "ones after them (target + removing, in that order)",
        "adding": "the target replicas not among the current ones",
        "removing": "the current replicas not in the target",
        "replicas after": "once every adding replica is in the ISR the removing ones go: the "
        "replicas are the target",
        "isr after": "the ISR loses the removing replicas (in its own order) and keeps the rest",
        "leader after": "a leader that stays keeps leading; a removed leader gives way to the "
        "first target replica in the new ISR",
    }
    for key in keys:
        mine, theirs = answer[key], expected[key]
        same = sorted(mine) == sorted(theirs) if key == "isr after" else mine == theirs
        if key != "leader after" and not isinstance(mine, list):
            same = False
        if not same:
            return Verdict(False, f"{key} is not {mine!r}: {rules[key]}")
    return Verdict(
        True,
        f"{current} -> {target}: replicas {moving.replicas} (adding {moving.adding}, removing "
        f"{moving.removing}) while it moves; then replicas {replicas_after}, ISR {isr_after}, "
        f"leader {leader_after} (one PartitionChangeRecord each step)",
    )


def _value(v: Any) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode()


def unclean_election_cost(answer: Any, history: Any) -> Verdict:
    """The acknowledged records an unclean election lost: ``answer`` is a collection of
    record values (bytes or str), ``history`` a History with its final log read
    after the election. Worked out by the history checker (kafkalab.cluster.history):
    acknowledged, but not in the final log."""
    from kafkalab.cluster.history import check

    if not answered(answer):
        return UNANSWERED
    if answer is None or isinstance(answer, (str, bytes, int)):
        return Verdict(False, "answer a collection (a set or list) of record values")
    lost = {_value(item["value"]) for item in check(history).lost}
    mine = {_value(v) for v in answer}
    if mine == lost:
        return Verdict(
            True,
            f"the election lost {len(lost)} acknowledged record(s): every record acknowledged "
            "while the old leader was the ISR's only member, which the new leader never had",
        )
    if mine - lost:
        extra = sorted(mine - lost)[:3]
        return Verdict(
            False,
            f"{len(mine - lost)} of yours are not lost (e.g. {extra}): they are in the final log, "
            "or were never acknowledged; an unacknowledged record was never promised",
        )
    return Verdict(
        False,
        f"{len(lost - mine)} more are lost: compare the acknowledged values (history.ops of "
        "kind 'ack') with the values in the final log (history.finals, (offset, value) pairs)",
    )
