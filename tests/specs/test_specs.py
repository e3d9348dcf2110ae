"""The TLA+ specs in CI: every configuration of specs/checks.toml gives its
expected verdict with the built-in checker, every counterexample (found now or
stored in specs/) replays step by step against kafkalab's Partition, and so do
random walks through every configuration (conformance).

KafkaRaft (specs/kraft/) traces replay against kafkalab's Raft voters
(kafkalab.specs.kraft_replay; more of it in test_kraft_replay.py); its
counterexamples are also followed through the spec itself, which keeps the
stored ones honest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalab.specs.kraft_replay import replay_kraft
from kafkalab.specs.replay import (
    ReplayMismatch,
    coordinator_serves_transaction_version,
    kafka_17754_trace,
    random_trace,
    random_walk,
    replay_replication,
    replay_transactions,
)
from kafkalab.specs.runner import (
    SPECS_DIR,
    ApalacheNotInstalled,
    CounterexampleDoesNotFollow,
    apalache_command,
    find_check,
    follow_counterexample,
    follow_trace,
    load_checks,
    run_check,
)
from kafkalab.specs.tla import check as builtin_check
from kafkalab.specs.trace import load_trace
from kafkalab.specs.trace_actions import KRAFT_ACTIONS
from kafkalab.viz.traces import (
    kraft_picture,
    kraft_table,
    replication_graph,
    replication_table,
    transactions_table,
)

CHECKS = load_checks()


def replay(trace):
    """The replay that fits the spec the trace comes from."""
    source = trace["#meta"]["source"] if isinstance(trace, dict) else trace.meta["source"]
    if "transactions" in source.lower():
        return replay_transactions(trace)
    if "kraft" in source.lower():
        return replay_kraft(trace)
    return replay_replication(trace)


@pytest.mark.parametrize("check", CHECKS, ids=[c.name for c in CHECKS])
def test_every_configuration_gives_its_expected_verdict(check):
    result = run_check(check)
    assert result.as_expected, result.summary
    if check.expect == "ok":
        assert result.counterexample is None and result.states > 1000
    elif check.name.startswith("kraft/"):
        # The counterexample is a behaviour of the spec that breaks the expected
        # invariant in its last state only, and kafkalab's Raft voters, with the
        # matching defect switched on, break it too.
        steps = follow_counterexample(check, result.counterexample, KRAFT_ACTIONS)
        assert len(steps) == len(result.counterexample["states"]) - 1
        assert "Next" not in steps  # every step is one named action instance
        report = replay(result.counterexample)
        assert len(report.steps) == len(steps) and report.defects
        assert any(v.startswith(check.expect) for v in report.violations), report.violations
    else:
        # The counterexample drives the implementation, configured the same way
        # (the unsafe rule, the broken coordinator), into the same states.
        report = replay(result.counterexample)
        assert len(report.steps) == len(result.counterexample["states"]) - 1


STORED = sorted(SPECS_DIR.glob("*/counterexamples/*.itf.json"))
KRAFT_STORED = [p for p in STORED if p.name.startswith("kraft--")]
STORED = [p for p in STORED if p not in KRAFT_STORED]


def _kraft_check(path: Path):
    return find_check(path.name.removesuffix(".itf.json").replace("--", "/"))


@pytest.mark.parametrize("path", STORED, ids=[p.name for p in STORED])
def test_stored_counterexamples_replay_against_kafkalab(path):
    trace = load_trace(path)
    report = replay(trace)
    assert len(report.steps) == len(trace) - 1
    if "replication" in path.name:
        table = replication_table(trace)
        assert set(table.index.get_level_values("replica")) == set(trace.states[0]["log"])
        assert "digraph" in replication_graph(trace).source
    else:
        table = transactions_table(trace)
        assert len(table) == len(trace) and table.iloc[-1]["owner"] != "none"


@pytest.mark.parametrize("path", KRAFT_STORED, ids=[p.name for p in KRAFT_STORED])
def test_stored_kraft_counterexamples_still_break_their_invariant(path):
    """Each stored KafkaRaft counterexample is still a behaviour of the spec
    under its configuration, and still breaks the invariant checks.toml expects,
    in its last state only. (A spec change that makes it stale fails here: check
    again with --save.)"""
    doc = json.loads(path.read_text())
    steps = follow_counterexample(_kraft_check(path), doc, KRAFT_ACTIONS)
    table = kraft_table(load_trace(doc), steps)
    assert len(table) == 3 * len(doc["states"]) and "Next" not in steps


@pytest.mark.parametrize("path", KRAFT_STORED, ids=[p.name for p in KRAFT_STORED])
def test_a_kraft_trace_is_drawn_as_voters_by_steps(path):
    """kraft_picture: a cell per voter and state, a column per step headed by the
    action that takes it, each cell saying the voter's role, epoch and log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    doc = json.loads(path.read_text())
    steps = follow_counterexample(_kraft_check(path), doc, KRAFT_ACTIONS)
    trace = load_trace(doc)
    ax = kraft_picture(trace, steps)
    try:
        assert len(ax.patches) == 3 * len(trace.states)
        heads = [t.get_text() for t in ax.get_xticklabels()]
        assert heads[0] == "0: initial" and heads[-1].startswith(f"{len(steps)}: ")
        assert steps[-1].split("(")[0] in heads[-1]
        texts = [t.get_text() for t in ax.texts]
        last = trace.states[-1]
        assert any(
            f"lead e{last['epoch'][v]}" in t
            for v in last["role"]
            if last["role"][v] == "leader"
            for t in texts
        )
    finally:
        plt.close(ax.figure)


def test_the_kraft_counterexamples_tell_the_bugs_they_stand_for():
    """KAFKA-12619: a leader's HW passes an older epoch's record before its own
    LeaderChange record is committed, and the next leader lacks that record.
    KAFKA-10527: a voter restarts, forgets its vote and elects a second leader
    in the same epoch."""
    hw = next(p for p in KRAFT_STORED if "hw-before-own-epoch" in p.name)
    trace = load_trace(hw)
    last = trace.states[-1]
    ((offset, record_epoch, by_epoch),) = last["committed"]
    assert record_epoch < by_epoch  # committed by a leader of a later epoch
    new_leader = next(
        v for v, r in last["role"].items() if r == "leader" and last["epoch"][v] > by_epoch
    )
    assert last["log"][new_leader][offset] != record_epoch
    vote = next(p for p in KRAFT_STORED if "vote-not-persisted" in p.name)
    doc = json.loads(vote.read_text())
    steps = follow_counterexample(_kraft_check(vote), doc, KRAFT_ACTIONS)
    restarted = next(s for s in steps if s.startswith("Restart"))
    voter = restarted.split('"')[1]
    granted = [s for s in steps if s.startswith("RequestVote") and s.endswith(f'"{voter}")')]
    assert len(granted) == 2 and steps.index(restarted) < steps.index(granted[1])
    epochs = {e for e, _ in load_trace(doc).states[-1]["elected"]}
    assert len(epochs) == 1 and len(load_trace(doc).states[-1]["elected"]) == 2


def test_a_kraft_counterexample_that_no_longer_follows_the_spec_is_refused():
    """Drop the restart from the vote-not-persisted counterexample: the voter
    would vote twice without forgetting, which the spec does not allow."""
    path = next(p for p in KRAFT_STORED if "vote-not-persisted" in p.name)
    doc = json.loads(path.read_text())
    check = _kraft_check(path)
    steps = follow_counterexample(check, doc, KRAFT_ACTIONS)
    at = steps.index(next(s for s in steps if s.startswith("Restart"))) + 1
    del doc["states"][at]
    with pytest.raises(CounterexampleDoesNotFollow, match=f"step {at} "):
        follow_counterexample(check, doc)
    shortened = json.loads(path.read_text())
    del shortened["states"][-1]
    with pytest.raises(CounterexampleDoesNotFollow, match="ElectionSafety holds in the last"):
        follow_counterexample(check, shortened)


def test_a_former_leader_that_forgot_its_vote_still_votes_for_no_rival():
    """What specs/kraft/README.md says of PersistElectionState = FALSE: the
    counterexample is a voter's lost vote; a former leader that comes back
    Unattached does not vote for a rival in its epoch, as its LeaderChange record
    makes every rival's log older (the model keeps logs whole)."""
    module = find_check("kraft/vote-not-persisted").module
    led_and_voted_for_another = (
        '\\A v \\in Voters : <<epoch[v], v>> \\in elected => votedFor[v] \\in {v, "none"}'
    )
    result = builtin_check(str(module), invariants=[led_and_voted_for_another], cinit="ConstInit")
    assert result.verdict == "ok" and result.distinct_states > 10_000


def test_the_correct_kraft_model_elects_and_commits():
    """The correct configuration's "holds" is not vacuous: within its bounds a
    leader is elected in every epoch up to MaxEpoch, records are committed, and
    a committed record is on every voter."""
    module = find_check("kraft/correct").module
    for reachable in [
        "\\A x \\in elected : x[1] < MaxEpoch",
        "committed = {}",
        '\\A v \\in Voters : hw[v] = 0 \\/ role[v] = "leader"',
        "\\A c \\in committed : \\E v \\in Voters : Len(log[v]) <= c[1]",
    ]:
        result = builtin_check(str(module), invariants=[reachable], cinit="ConstInit")
        assert result.verdict == "violation", reachable


@pytest.mark.parametrize("name", ["kraft/restarts", "kraft/hw-before-own-epoch"])
def test_every_kraft_step_is_named_by_one_action_of_next(name):
    """Random walks through the spec: each step is taken by an action instance in
    KRAFT_ACTIONS (what a replay will map onto the Raft module's calls), so the
    table covers the spec's Next."""
    module = find_check(name).module
    for seed in range(5):
        walk = random_walk(module, 30, seed)
        steps = follow_trace(module, walk, KRAFT_ACTIONS)
        assert len(steps) == len(walk["states"]) - 1 and "Next" not in steps


MODELS = sorted(SPECS_DIR.glob("*/MC_*.tla"))


NO_TRANSACTION_VERSION_2 = pytest.mark.skipif(
    not coordinator_serves_transaction_version(2),
    reason="transaction.version=2 not served: kafkalab's TransactionStateMachine has no "
    "transaction_version mode yet (issue 23, part 2), so version-2 traces have nothing to "
    "replay on",
)


def _model_marks(m: Path):
    if "TransactionVersion = 2" in m.read_text():
        return [NO_TRANSACTION_VERSION_2]
    return []


@pytest.mark.parametrize(
    "module",
    [pytest.param(m, marks=_model_marks(m)) for m in MODELS],
    ids=[m.stem for m in MODELS],
)
def test_random_walks_through_the_spec_replay_against_kafkalab(module):
    for seed in range(25):
        replay(random_trace(module, 30, seed))


def test_a_replay_names_the_first_step_where_code_and_spec_disagree(tmp_path):
    """Tamper with a stored counterexample: the replica's HW after a fetch is not
    what the implementation computes."""
    doc = json.loads(next(p for p in STORED if "replication" in p.name).read_text())
    target = doc["states"][-1]["hw"]
    replica = sorted(k for k in target if k != "#meta")[0]
    target[replica] = {"#bigint": "7"}
    with pytest.raises(ReplayMismatch) as mismatch:
        replay_replication(doc)
    assert mismatch.value.step == len(doc["states"]) - 1
    assert "HW" in str(mismatch.value)


def test_a_length_bound_says_the_verdict_holds_only_within_it():
    """The high-watermark rule loses a committed record after 9 steps; a search
    stopped at 4 finds nothing, and must not claim more than that."""
    check = next(c for c in CHECKS if c.name == "replication/high-watermark")
    short = run_check(check, length=4)
    assert (short.verdict, short.bounded, short.length) == ("ok", True, 4)
    assert "ok within 4 steps" in short.line() and not short.as_expected
    full = run_check(check)
    assert not full.bounded and full.verdict == "violation" and full.as_expected


def test_the_command_line_checks_and_replays(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "kafkalab", "specs", "check", "replication/leader-epoch",
         "--save", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "violation of NoCommittedLoss" in run.stdout and "as expected" in run.stdout
    (saved,) = tmp_path.glob("*.itf.json")
    replay = subprocess.run(
        [sys.executable, "-m", "kafkalab", "specs", "replay", str(saved)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert replay.returncode == 0 and "kafkalab did what the spec did" in replay.stdout
    unknown = subprocess.run(
        [sys.executable, "-m", "kafkalab", "specs", "check", "nope"], capture_output=True, text=True
    )
    assert unknown.returncode == 2 and "unknown spec" in unknown.stderr


def _apalache_installed() -> bool:
    try:
        apalache_command()
    except ApalacheNotInstalled:
        return False
    return True


@pytest.mark.skipif(
    not _apalache_installed(),
    reason="Apalache is not installed here (no apalache-mc on PATH, no APALACHE_HOME); "
    "Binder installs it, CI machines cannot",
)
@pytest.mark.parametrize("check", CHECKS, ids=[c.name for c in CHECKS])
def test_apalache_agrees_with_the_built_in_checker(check):
    # KAFKA-12619's counterexample (kraft/hw-before-own-epoch) is 13 steps long.
    result = run_check(
        check, checker="apalache", length=14 if check.name.startswith("kraft/") else 12
    )
    assert result.as_expected, result.summary
    if result.counterexample:  # Apalache's trace does not carry the constants: read them
        text = Path(check.module).read_text()
        if check.name.startswith("kraft/"):
            follow_counterexample(check, result.counterexample)
        elif "TruncationRule" in text:
            rule = text.split('TruncationRule = "', 1)[1].split('"', 1)[0]
            replay_replication(result.counterexample, rule)
        else:
            replay_transactions(result.counterexample, "BumpEpochOnInit = TRUE" in text)


def test_without_apalache_the_command_says_how_to_get_it(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("APALACHE_HOME", raising=False)
    with pytest.raises(ApalacheNotInstalled, match="APALACHE_HOME"):
        run_check(CHECKS[0], checker="apalache")


def test_the_command_line_shows_and_replays_a_kraft_trace():
    path = next(p for p in KRAFT_STORED if "vote-not-persisted" in p.name)
    show = subprocess.run(
        [sys.executable, "-m", "kafkalab", "specs", "show", str(path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert show.returncode == 0, show.stderr
    assert "voted for" in show.stdout and "candidate" in show.stdout
    replay = subprocess.run(
        [sys.executable, "-m", "kafkalab", "specs", "replay", str(path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert replay.returncode == 0, replay.stderr
    assert "kafkalab did what the spec did" in replay.stdout
    assert "kafkalab's voters break ElectionSafety: epoch 1 had leaders c1, c2" in replay.stdout
    correct = subprocess.run(
        [sys.executable, "-m", "kafkalab", "specs", "replay", str(path), "--defects", "none"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert correct.returncode == 1 and 'step 4 (Restart("c3"))' in correct.stderr
    assert "KAFKA-10527" in correct.stderr


# -- KAFKA-17754: a delayed EndTxn under transaction version 1 and 2 ------------------------


def test_kafka_17754_under_version_1_a_held_endtxn_ends_the_next_transaction():
    """Transaction 1's EndTxn(commit or abort), held while its retry ended
    transaction 1, arrives in transaction 2 (same epoch): the coordinator ends
    transaction 2, which the producer never asked for; kafkalab's coordinator
    does the same."""
    trace = load_trace(kafka_17754_trace(1))
    before, after = trace.states[-2], trace.states[-1]
    (held,) = before["delayed"]
    assert held["txn"] == 1 and held["epoch"] == after["coordinator"]["epoch"]
    assert after["coordinator"]["state"] in ("PrepareCommit", "PrepareAbort")
    assert after["coordinator"]["txns"] == [2] and after["producer"]["p1"]["txn"] == 2
    report = replay_transactions(trace)
    assert (
        "held EndTxn" in report.steps[-1]["action"] and "refused" not in report.steps[-1]["action"]
    )


def test_the_kafka_17754_counterexample_shows_a_read_of_an_uncommitted_transaction():
    """The stored counterexample: the held EndTxn(commit) of transaction 1
    commits transaction 2's record in t0; the producer goes on with transaction 2
    (adds t1): read_committed returns a record of a transaction still open."""
    (path,) = [p for p in STORED if "delayed-endtxn-v1" in p.name]
    trace = load_trace(path)
    report = replay_transactions(trace)
    delivered = [s for s in report.steps if "held EndTxn" in s["action"]]
    assert len(delivered) == 1 and "arrives with epoch" in delivered[0]["action"]
    last = trace.states[-1]
    txns = {e["txn"] for e in last["log"]["t0"] if e["kind"] == "data"}
    assert txns == {2} and last["outcome"][1] == "open"  # outcome: a list, txn t at t - 1
    assert last["log"]["t0"][-1]["kind"] == "commit"


def test_kafka_17754_under_version_2_the_held_endtxn_changes_nothing():
    """The same scenario under transaction version 2: EndTxn bumped the epoch,
    so the held copy names an epoch that is over; the spec's coordinator does
    not move. Replayed on kafkalab's coordinator when it serves version 2."""
    trace = load_trace(kafka_17754_trace(2))
    before, after = trace.states[-2], trace.states[-1]
    (held,) = before["delayed"]
    assert held["epoch"] < before["coordinator"]["epoch"]
    assert after["coordinator"] == before["coordinator"] and after["outcome"] == before["outcome"]
    if not coordinator_serves_transaction_version(2):
        pytest.skip(
            "transaction.version=2 not served: kafkalab's TransactionStateMachine has no "
            "transaction_version mode yet (issue 23, part 2)"
        )
    report = replay_transactions(trace)
    assert "held EndTxn" in report.steps[-1]["action"]  # and the coordinator did not move
