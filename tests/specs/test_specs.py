"""The TLA+ specs in CI: every configuration of specs/checks.toml gives its
expected verdict with the built-in checker, every counterexample (found now or
stored in specs/) replays step by step against kafkalab's Partition, and so do
random walks through every replication configuration (conformance)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalab.specs.replay import (
    ReplayMismatch,
    random_trace,
    replay_replication,
    replay_transactions,
)
from kafkalab.specs.runner import (
    SPECS_DIR,
    ApalacheNotInstalled,
    apalache_command,
    load_checks,
    run_check,
)
from kafkalab.specs.trace import load_trace
from kafkalab.viz.traces import replication_graph, replication_table, transactions_table

CHECKS = load_checks()


def replay(trace):
    """The replay that fits the spec the trace comes from."""
    source = trace["#meta"]["source"] if isinstance(trace, dict) else trace.meta["source"]
    if "transactions" in source.lower():
        return replay_transactions(trace)
    return replay_replication(trace)


@pytest.mark.parametrize("check", CHECKS, ids=[c.name for c in CHECKS])
def test_every_configuration_gives_its_expected_verdict(check):
    result = run_check(check)
    assert result.as_expected, result.summary
    if check.expect == "ok":
        assert result.counterexample is None and result.states > 1000
    else:
        # The counterexample drives the implementation, configured the same way
        # (the unsafe rule, the broken coordinator), into the same states.
        report = replay(result.counterexample)
        assert len(report.steps) == len(result.counterexample["states"]) - 1


STORED = sorted(SPECS_DIR.glob("*/counterexamples/*.itf.json"))


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


MODELS = sorted(SPECS_DIR.glob("*/MC_*.tla"))


@pytest.mark.parametrize("module", MODELS, ids=[m.stem for m in MODELS])
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
    result = run_check(check, checker="apalache", length=12)
    assert result.as_expected, result.summary
    if result.counterexample:  # Apalache's trace does not carry the constants: read them
        text = Path(check.module).read_text()
        if "TruncationRule" in text:
            rule = text.split('TruncationRule = "', 1)[1].split('"', 1)[0]
            replay_replication(result.counterexample, rule)
        else:
            replay_transactions(result.counterexample, "BumpEpochOnInit = TRUE" in text)


def test_without_apalache_the_command_says_how_to_get_it(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("APALACHE_HOME", raising=False)
    with pytest.raises(ApalacheNotInstalled, match="APALACHE_HOME"):
        run_check(CHECKS[0], checker="apalache")
