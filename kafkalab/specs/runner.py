"""Check the specs in specs/: every configuration in specs/checks.toml, with
Apalache where it is installed or with the built-in checker (kafkalab.specs.tla).

    from kafkalab.specs import run_check, load_checks
    result = run_check("replication/high-watermark")          # built-in checker
    result.verdict, result.invariant, result.states, result.depth, result.seconds
    result.counterexample                                      # ITF JSON (a dict) or None
    result.as_expected                                         # verdict == checks.toml's expect

A trace can also be followed through the spec itself, without any
implementation (`follow_trace`, naming each step by the action that takes it;
`follow_counterexample`): it must start in an initial state,
take only steps of the next-state relation and break the invariant the check
expects in its last state and no earlier one. That is how CI keeps a stored
counterexample honest for a spec whose implementation cannot replay it yet.

Apalache is found as `apalache-mc` on PATH or in $APALACHE_HOME/bin. It checks
one invariant per run (`--inv`), with `--cinit=ConstInit`, and `--length` (its
bound on the number of steps, 10 by default here as in Apalache); its ITF
counterexample is read back from the run directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from kafkalab.specs.tla import check as builtin_check
from kafkalab.specs.tla import read_itf
from kafkalab.specs.tla.itf import trace_to_itf

SPECS_DIR = Path(__file__).resolve().parents[2] / "specs"
APALACHE_DEFAULT_LENGTH = 10


class ApalacheNotInstalled(RuntimeError):
    pass


@dataclass(frozen=True)
class SpecCheck:
    name: str
    module: Path
    invariants: list[str]
    expect: str  # "ok" or the invariant that must be violated
    length: int | None = None


@dataclass
class SpecResult:
    check: SpecCheck
    checker: str  # builtin | apalache
    verdict: str  # ok | violation | incomplete
    invariant: str | None
    states: int  # distinct states (built-in); 0 for Apalache (it does not count states)
    depth: int
    seconds: float
    counterexample: dict | None  # ITF
    summary: str
    # The step bound that stopped the search before it was complete (--length, or
    # Apalache's bounded model checking): "ok" then means "no violation within it".
    length: int | None = None

    @property
    def bounded(self) -> bool:
        return self.length is not None

    @property
    def as_expected(self) -> bool:
        if self.check.expect == "ok":
            return self.verdict == "ok"
        return self.verdict == "violation" and self.invariant == self.check.expect

    def line(self) -> str:
        expected = "as expected" if self.as_expected else f"EXPECTED {self.check.expect}"
        what = self.verdict if self.invariant is None else f"{self.verdict} of {self.invariant}"
        if self.bounded and self.verdict == "ok":
            what = f"ok within {self.length} steps"
        states = f"{self.states:,} states, " if self.states else ""
        return (
            f"{self.check.name}: {what} ({states}depth {self.depth}, "
            f"{self.seconds:.1f} s, {self.checker}) {expected}"
        )


def load_checks(specs_dir: Path = SPECS_DIR) -> list[SpecCheck]:
    doc = tomllib.loads((specs_dir / "checks.toml").read_text())
    return [
        SpecCheck(
            name=c["name"],
            module=specs_dir / c["module"],
            invariants=list(c["invariants"]),
            expect=c["expect"],
            length=c.get("length"),
        )
        for c in doc["check"]
    ]


def find_check(name: str, specs_dir: Path = SPECS_DIR) -> SpecCheck:
    checks = load_checks(specs_dir)
    for c in checks:
        if c.name == name:
            return c
    raise KeyError(f"no check named {name!r}; known: {', '.join(c.name for c in checks)}")


def run_check(
    spec: str | SpecCheck,
    checker: str = "builtin",
    length: int | None = None,
    progress=None,
) -> SpecResult:
    c = find_check(spec) if isinstance(spec, str) else spec
    if checker == "builtin":
        return _run_builtin(c, length if length is not None else c.length, progress)
    if checker == "apalache":
        return _run_apalache(c, length or c.length or APALACHE_DEFAULT_LENGTH)
    raise ValueError(f"unknown checker {checker!r}: use builtin or apalache")


def _run_builtin(c: SpecCheck, length: int | None, progress) -> SpecResult:
    r = builtin_check(
        str(c.module),
        init="Init",
        next="Next",
        invariants=c.invariants,
        cinit="ConstInit",
        max_depth=length,
        progress=progress,
    )
    itf = None
    if r.trace:
        itf = trace_to_itf(
            r.variables,
            r.trace,
            source=str(c.module.name),
            invariant=r.invariant,
            actions=r.actions,
        )
        # The scalar constants (the truncation rule...), so a replay knows them.
        itf["#meta"]["constants"] = {
            k: v for k, v in r.constants.items() if isinstance(v, str | int)
        }
    return SpecResult(
        c,
        "builtin",
        r.verdict,
        r.invariant,
        r.distinct_states,
        r.depth,
        r.seconds,
        itf,
        r.summary(),
        length=r.max_depth if r.bounded else None,
    )


def apalache_command() -> str:
    """The apalache-mc executable, or ApalacheNotInstalled saying how to get it."""
    found = shutil.which("apalache-mc")
    home = os.environ.get("APALACHE_HOME")
    if found is None and home and (Path(home) / "bin" / "apalache-mc").exists():
        found = str(Path(home) / "bin" / "apalache-mc")
    if found is None:
        raise ApalacheNotInstalled(
            "Apalache is not installed: put apalache-mc on PATH or set APALACHE_HOME "
            "(Binder's postBuild installs it), or use --checker builtin"
        )
    return found


def _run_apalache(c: SpecCheck, length: int) -> SpecResult:
    exe = apalache_command()
    start = time.perf_counter()
    outputs = []
    for invariant in c.invariants:
        with tempfile.TemporaryDirectory(prefix="kafkalab-apalache-") as run_dir:
            proc = subprocess.run(
                [
                    exe,
                    "check",
                    "--cinit=ConstInit",
                    "--init=Init",
                    "--next=Next",
                    f"--inv={invariant}",
                    f"--length={length}",
                    f"--run-dir={run_dir}",
                    c.module.name,
                ],
                cwd=c.module.parent,
                capture_output=True,
                text=True,
            )
            outputs.append(proc.stdout + proc.stderr)
            traces = sorted(Path(run_dir).rglob("violation*.itf.json")) or sorted(
                Path(run_dir).rglob("counterexample*.itf.json")
            )
            if traces:
                itf = read_itf(traces[0])
                raw = trace_to_itf(
                    itf["vars"], itf["states"], source=c.module.name, invariant=invariant
                )
                return SpecResult(
                    c,
                    "apalache",
                    "violation",
                    invariant,
                    0,
                    len(itf["states"]),
                    time.perf_counter() - start,
                    raw,
                    outputs[-1][-2000:],
                )
            if proc.returncode != 0:
                raise RuntimeError(
                    f"apalache-mc failed on {c.module.name} (exit {proc.returncode}):\n"
                    + outputs[-1][-4000:]
                )
    return SpecResult(
        c,
        "apalache",
        "ok",
        None,
        0,
        length,
        time.perf_counter() - start,
        None,
        outputs[-1][-2000:],
        length=length,  # Apalache checks executions of up to `length` steps
    )


class CounterexampleDoesNotFollow(AssertionError):
    """A counterexample is not (or no longer) a behaviour of its spec that breaks
    the expected invariant: the spec changed under it; check again and --save."""


def follow_trace(module: str | Path, itf: dict, actions: dict[str, int] | None = None) -> list[str]:
    """Follow the ITF trace `itf` through the spec `module` (an MC_*.tla, with
    the constants of its ConstInit): the first state must be initial and each
    state follow from the one before by Next, or CounterexampleDoesNotFollow.
    Returns a name for each step: with `actions` ({action name: number of
    parameters}, the parameters ranging over the first set-valued constant), the
    action instance that takes it, e.g. 'RequestVote("c2", "c3")'; otherwise
    'Next'."""
    from kafkalab.specs.tla import load_module, solve_constants
    from kafkalab.specs.tla.itf import itf_from_json

    mod = load_module(str(module))
    constants = solve_constants(mod, "ConstInit", None)
    states = itf_from_json(itf)["states"]
    if not states:
        raise CounterexampleDoesNotFollow("the trace has no states")
    if states[0] not in mod.initial_states("Init", constants):
        raise CounterexampleDoesNotFollow("its first state is not an initial state of the spec")
    params = next((sorted(v) for v in constants.values() if isinstance(v, frozenset) and v), [])
    names = []
    for i, (before, after) in enumerate(zip(states, states[1:], strict=False), start=1):
        if after not in [s for _, s in mod.successors(before, "Next", constants)]:
            raise CounterexampleDoesNotFollow(f"step {i} is not a step of Next")
        names.append(_action_taking(mod, constants, before, after, actions or {}, params))
    return names


def _action_taking(mod, constants, before, after, actions, params) -> str:
    from itertools import product

    for action, arity in actions.items():
        for args in product(params, repeat=arity):
            literals = ", ".join(f'"{a}"' if isinstance(a, str) else str(a) for a in args)
            call = f"{action}({literals})"
            if any(s == after for _, s in mod.successors(before, call, constants)):
                return call
    return "Next"


def follow_counterexample(
    spec: str | SpecCheck, itf: dict, actions: dict[str, int] | None = None
) -> list[str]:
    """Follow the ITF counterexample `itf` through the spec of check `spec`
    (`follow_trace`), and check that it breaks the invariant the check expects
    in its last state and in no earlier one. Returns the names of its steps."""
    from kafkalab.specs.tla import load_module, solve_constants
    from kafkalab.specs.tla.itf import itf_from_json

    c = find_check(spec) if isinstance(spec, str) else spec
    if c.expect == "ok":
        raise ValueError(f"{c.name} expects no violation: it has no counterexample to follow")
    names = follow_trace(c.module, itf, actions)
    mod = load_module(str(c.module))
    constants = solve_constants(mod, "ConstInit", None)
    states = itf_from_json(itf)["states"]
    for i, st in enumerate(states):
        holds = mod.evaluate(c.expect, constants, st)
        if holds is not (i < len(states) - 1):
            where = "the last state" if i == len(states) - 1 else f"state {i}"
            raise CounterexampleDoesNotFollow(
                f"{c.expect} {'holds' if holds else 'fails'} in {where} of the counterexample"
            )
    return names
