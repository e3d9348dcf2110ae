"""The model checker on classic specs.  Every count and counterexample length asserted
here is also computed by a direct Python breadth-first search of the same system, so
the assertions do not rest on remembered numbers."""

from __future__ import annotations

import itertools
import os

import pytest

from kafkalab.specs.tla import TlaEvalError, check, load_module

HERE = os.path.join(os.path.dirname(__file__), "tla")


def spec(name: str) -> str:
    return os.path.join(HERE, name + ".tla")


def bfs(inits, succ, bad=None, max_depth=None):
    """Reference BFS: (distinct, generated, depth, length of the shortest path to a
    state satisfying ``bad``, or None)."""
    seen = {}
    generated = 0
    level = []
    for s in inits:
        generated += 1
        if s not in seen:
            seen[s] = None
            level.append(s)
            if bad and bad(s):
                return len(seen), generated, 1, 1
    depth = 1 if level else 0
    lvl = 0
    while level and (max_depth is None or lvl < max_depth):
        nxt = []
        for s in level:
            for t in succ(s):
                generated += 1
                if t not in seen:
                    seen[t] = s
                    nxt.append(t)
                    if bad and bad(t):
                        n, p = 1, t
                        while seen[p] is not None:
                            n, p = n + 1, seen[p]
                        return len(seen), generated, n, n
        level = nxt
        lvl += 1
        if level:
            depth += 1
    return len(seen), generated, depth, None


# -- Die Hard ---------------------------------------------------------------------------
def diehard_succ(st):
    small, big = st
    pour_sb = min(big + small, 5)
    pour_bs = min(big + small, 3)
    return [
        (3, big),
        (small, 5),
        (0, big),
        (small, 0),
        (small - (pour_sb - big), pour_sb),
        (pour_bs, big - (pour_bs - small)),
    ]


def test_diehard_state_space():
    r = check(spec("DieHard"), init="Init", next="Next", invariants=["TypeOK"])
    distinct, generated, depth, _ = bfs([(0, 0)], diehard_succ)
    assert r.verdict == "ok", r.summary()
    assert r.distinct_states == distinct == 16
    assert r.states_generated == generated
    assert r.depth == depth
    assert r.trace is None and r.invariant is None
    assert r.variables == ["small", "big"]


def test_diehard_shortest_counterexample():
    r = check(spec("DieHard"), init="Init", next="Next", invariants=["TypeOK", "NotSolved"])
    *_, length = bfs([(0, 0)], diehard_succ, bad=lambda s: s[1] == 4)
    assert r.verdict == "violation"
    assert r.invariant == "NotSolved"
    assert len(r.trace) == length == 7
    assert r.trace[0] == {"small": 0, "big": 0}
    assert r.trace[-1]["big"] == 4
    for a, b in itertools.pairwise(r.trace):  # every step is a real transition
        assert (b["small"], b["big"]) in diehard_succ((a["small"], a["big"]))
    assert r.actions[0] is None and r.actions[1] in {"FillBigJug", "FillSmallJug"}
    text = r.summary()
    assert "Invariant NotSolved is violated" in text and "/\\ big = 4" in text


# -- HourClock --------------------------------------------------------------------------
def test_hourclock():
    r = check(spec("HourClock"), init="HCini", next="HCnxt", invariants=["HCTypeOK"])
    distinct, generated, depth, _ = bfs(range(1, 13), lambda h: [h % 12 + 1])
    assert (r.distinct_states, r.states_generated, r.depth) == (distinct, generated, depth)
    assert distinct == 12


# -- TCommit ----------------------------------------------------------------------------
RMS = ("r1", "r2", "r3")


def tcommit_succ(st):
    out = []
    for i, s in enumerate(st):

        def put(v, i=i):
            return st[:i] + (v,) + st[i + 1 :]

        if s == "working":
            out.append(put("prepared"))
        if s == "prepared" and all(x in ("prepared", "committed") for x in st):
            out.append(put("committed"))
        if s in ("working", "prepared") and all(x != "committed" for x in st):
            out.append(put("aborted"))
    return out


def test_tcommit_with_constinit():
    r = check(
        spec("TCommit"),
        init="TCInit",
        next="TCNext",
        invariants=["TCTypeOK", "TCConsistent"],
        cinit="ConstInit",
    )
    distinct, generated, depth, _ = bfs([("working",) * 3], tcommit_succ)
    assert r.verdict == "ok"
    assert (r.distinct_states, r.states_generated, r.depth) == (distinct, generated, depth)
    assert r.constants == {"RM": frozenset(RMS)}


def test_constants_can_be_given_directly():
    r = check(
        spec("TCommit"),
        init="TCInit",
        next="TCNext",
        invariants=["TCConsistent"],
        constants={"RM": {"a", "b"}},
    )
    distinct, *_ = bfs([("working",) * 2], tcommit_succ)
    assert r.distinct_states == distinct


# -- TwoPhase ---------------------------------------------------------------------------
def twophase_succ(st):
    rm, tm, prepared, msgs = st
    out = []
    if tm == "init" and prepared == frozenset(RMS):
        out.append((rm, "done", prepared, msgs | {("Commit",)}))
    if tm == "init":
        out.append((rm, "done", prepared, msgs | {("Abort",)}))
    for i, r in enumerate(RMS):

        def put(v, i=i):
            return rm[:i] + (v,) + rm[i + 1 :]

        if tm == "init" and ("Prepared", r) in msgs:
            out.append((rm, tm, prepared | {r}, msgs))
        if rm[i] == "working":
            out.append((put("prepared"), tm, prepared, msgs | {("Prepared", r)}))
            out.append((put("aborted"), tm, prepared, msgs))
        if ("Commit",) in msgs:
            out.append((put("committed"), tm, prepared, msgs))
        if ("Abort",) in msgs:
            out.append((put("aborted"), tm, prepared, msgs))
    return out


TP_INIT = (("working",) * 3, "init", frozenset(), frozenset())


def test_twophase_invariants_hold():
    r = check(
        spec("TwoPhase"),
        init="TPInit",
        next="TPNext",
        invariants=["TPTypeOK", "TCConsistent"],
        cinit="ConstInit",
    )
    distinct, generated, depth, _ = bfs([TP_INIT], twophase_succ)
    assert r.verdict == "ok", r.summary()
    assert (r.distinct_states, r.states_generated, r.depth) == (distinct, generated, depth)
    assert r.variables == ["rmState", "tmState", "tmPrepared", "msgs"]  # extended first


def test_twophase_counterexample_is_shortest_and_labelled():
    r = check(
        spec("TwoPhase"),
        init="TPInit",
        next="TPNext",
        invariants=["NobodyCommits"],
        cinit="ConstInit",
    )
    *_, length = bfs([TP_INIT], twophase_succ, bad=lambda s: "committed" in s[0])
    assert r.verdict == "violation" and r.invariant == "NobodyCommits"
    assert len(r.trace) == length
    assert r.actions[-1] == "RMRcvCommitMsg"
    assert "TMCommit" in r.actions


# -- deadlock, bounds, errors ------------------------------------------------------------------
def counter_succ(st, limit=5):
    c, log = st
    return [(c + 1, log + (c,))] if c < limit else []


def test_deadlock_is_reported_with_its_trace():
    r = check(spec("Counter"), next="Next", cinit="ConstInit", check_deadlock=True)
    assert r.verdict == "violation" and r.invariant == "deadlock"
    *_, length = bfs([(0, ())], counter_succ, bad=lambda s: not counter_succ(s))
    assert len(r.trace) == length == 6
    assert r.trace[-1] == {"c": 5, "log": (0, 1, 2, 3, 4)}
    assert "Deadlock" in r.summary()
    assert check(spec("Counter"), cinit="ConstInit").verdict == "ok"


def test_max_depth_bounds_the_search():
    r = check(spec("Counter"), cinit="ConstInit", invariants=["LogMatches"], max_depth=2)
    distinct, generated, depth, _ = bfs([(0, ())], counter_succ, max_depth=2)
    assert r.verdict == "ok" and r.bounded
    assert (r.distinct_states, r.states_generated, r.depth) == (distinct, generated, depth)
    assert distinct == 3
    # the violation of Small is 3 steps away: not within 2 steps, found within 3
    assert check(spec("Counter"), cinit="ConstInit", invariants=["Small"], max_depth=2).ok
    r3 = check(spec("Counter"), cinit="ConstInit", invariants=["Small"], max_depth=3)
    assert r3.verdict == "violation" and len(r3.trace) == 4


def test_max_states_gives_incomplete():
    r = check(spec("Counter"), cinit="ConstInit", max_states=3)
    assert r.verdict == "incomplete"
    assert r.distinct_states == 3
    assert "incomplete" in r.summary()


def test_branching_init_and_next():
    r = check(spec("BranchInit"), cinit="ConstInit", invariants=["Bounded"])
    procs, mx = ("a", "b"), 2
    nxt = {"idle": "busy", "busy": "done", "done": "idle"}

    def succ(st):
        pc, n = st
        out = []
        for i, _ in enumerate(procs):
            cur = pc[i]
            pc2 = pc[:i] + (nxt[cur],) + pc[i + 1 :]
            if cur == "done":
                out.append((pc2, n))
            else:
                out.extend((pc2, k) for k in range(n, mx + 1))
        return out

    inits = [(("idle", "idle"), n) for n in (0, 1)]
    distinct, generated, depth, _ = bfs(inits, succ)
    assert r.verdict == "ok"
    assert (r.distinct_states, r.states_generated, r.depth) == (distinct, generated, depth)


def test_unassigned_variable_names_variable_and_action():
    with pytest.raises(TlaEvalError) as ei:
        check(spec("Counter"), next="ForgetsLog", cinit="ConstInit")
    assert "log" in str(ei.value) and "ForgetsLog" in str(ei.value)


def test_evaluation_error_while_checking_names_the_state():
    with pytest.raises(TlaEvalError) as ei:
        check(spec("Counter"), next="Crash", cinit="ConstInit")
    text = str(ei.value)
    assert "Head of the empty sequence" in text
    assert "Counter.tla:21:18:" in text
    assert "depth 1" in text and "/\\ log = <<>>" in text


def test_assume_is_checked():
    with pytest.raises(TlaEvalError, match="ASSUME"):
        check(spec("Counter"), constants={"Limit": -1})


def test_progress_callback_and_module_helpers():
    calls = []
    check(spec("DieHard"), progress=lambda *a: calls.append(a))
    assert calls and calls[-1][0] == 16
    mod = load_module(spec("DieHard"))
    assert mod.initial_states() == [{"small": 0, "big": 0}]
    labels = {lb for lb, _ in mod.successors({"small": 0, "big": 5})}
    assert "BigToSmall" in labels


def test_speed_on_twophase_with_five_resource_managers():
    r = check(
        spec("TwoPhase"),
        init="TPInit",
        next="TPNext",
        invariants=["TPTypeOK", "TCConsistent"],
        constants={"RM": {f"r{i}" for i in range(5)}},
    )
    assert r.verdict == "ok"
    assert r.distinct_states > 8000
    assert r.states_per_second() > 5000, r.summary()
