"""Explicit-state model checking by breadth-first search, and its result.

Keeps ``check`` and ``CheckResult``.  Invariants of the search:

* states are tuples of values in variable-declaration order; two states are the same
  state exactly when the tuples are equal (values are canonical, see ``values``);
* the search is level by level, so the first time a state is seen it is at its minimal
  distance from an initial state, and following parent pointers back from any state
  gives a shortest path: a counterexample is always a shortest one;
* invariants are checked on every distinct state when it is first seen (initial states
  included); with ``max_depth = N`` states N steps away are checked but not expanded;
* ``states_generated`` counts every initial state and every successor computed, before
  deduplication (TLC's "states generated"); ``depth`` is the number of BFS levels that
  contain states (TLC's "depth of the complete state graph search": 1 when only initial
  states exist; a violation found in level k has a trace of ``depth`` = k + 1 states).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .errors import TlaError, TlaEvalError
from .evaluator import ROOT, UNSET, Instance
from .module import Module, load_module
from .parser import parse_expression
from .values import fmt, from_python

ITF_DESCRIPTION_URL = "https://apalache-mc.org/docs/adr/015adr-trace.html"


@dataclass
class CheckResult:
    verdict: str  # "ok" | "violation" | "incomplete"
    invariant: str | None
    distinct_states: int
    states_generated: int
    depth: int
    seconds: float
    trace: list[dict] | None
    variables: list[str]
    actions: list[str | None] | None = None  # per trace state: the action that led to it
    source: str = ""
    constants: dict = field(default_factory=dict)
    max_depth: int | None = None
    bounded: bool = False  # True when max_depth stopped the search before it was complete
    queue: int = 0  # states left unexplored (incomplete or bounded searches)
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    def states_per_second(self) -> float:
        return self.states_generated / self.seconds if self.seconds > 0 else float("inf")

    def format_trace(self) -> str:
        if not self.trace:
            return ""
        lines = []
        for i, st in enumerate(self.trace):
            label = self.actions[i] if self.actions else None
            head = "Initial predicate" if i == 0 else f"Action {label or '?'}"
            lines.append(f"State {i + 1}: <{head}>")
            for v in self.variables:
                lines.append(f"/\\ {v} = {fmt(st[v])}")
            lines.append("")
        return "\n".join(lines)

    def summary(self) -> str:
        out = []
        if self.verdict == "ok":
            if self.bounded:
                out.append(
                    f"No error has been found within {self.max_depth} step(s) "
                    "(bounded search: states deeper than that were not explored)."
                )
            else:
                out.append("Model checking completed. No error has been found.")
        elif self.verdict == "violation":
            if self.invariant == "deadlock":
                out.append("Error: Deadlock reached.")
            else:
                out.append(f"Error: Invariant {self.invariant} is violated.")
            out.append("Error: The behavior up to this point is:")
            out.append(self.format_trace())
        else:
            out.append(f"Model checking stopped (incomplete): {self.message}")
        out.append(
            f"{self.states_generated} states generated, {self.distinct_states} distinct states "
            f"found, {self.queue} states left on queue."
        )
        out.append(f"The depth of the complete state graph search is {self.depth}.")
        rate = self.states_per_second()
        rate_text = f"{rate:.0f}" if rate != float("inf") else "-"
        out.append(f"Finished in {self.seconds:.2f}s ({rate_text} states generated/s).")
        return "\n".join(out)

    def to_itf(self) -> dict:
        from .itf import trace_to_itf

        desc = f"kafkalab TLA+ checker: {self.verdict}"
        if self.invariant:
            desc += f" ({self.invariant})"
        return trace_to_itf(
            self.variables,
            self.trace or [],
            source=self.source,
            description=desc,
            invariant=self.invariant,
            actions=self.actions,
        )


def _parse(text: str):
    return parse_expression(text, f"<{text}>" if len(text) < 40 else "<expr>")


def solve_constants(mod: Module, cinit: str | None, given: dict | None) -> dict:
    """Constants fixed by ``given`` and by the ConstInit predicate ``cinit`` (which must
    have exactly one solution)."""
    given = {k: from_python(v) for k, v in (given or {}).items()}
    if cinit is None:
        return given
    cinst = Instance(mod, {}, mod.constants)
    act = cinst.actions(True).act(_parse(cinit))
    start = tuple(given.get(c, UNSET) for c in mod.constants)
    sols = list(dict.fromkeys(act(start, start, ())))
    if not sols:
        raise TlaEvalError(f"the constant predicate {cinit} has no solution")
    if len(sols) > 1:
        raise TlaEvalError(
            f"the constant predicate {cinit} has {len(sols)} solutions; exactly one is needed"
        )
    return {c: v for c, v in zip(mod.constants, sols[0], strict=True) if v is not UNSET}


def _describe_state(names, st) -> str:
    return "\n".join(f"/\\ {v} = {fmt(x)}" for v, x in zip(names, st, strict=True))


def check(
    path,
    init: str = "Init",
    next: str = "Next",
    invariants=(),
    cinit: str | None = None,
    max_depth: int | None = None,
    max_states: int = 2_000_000,
    check_deadlock: bool = False,
    progress=None,
    constants: dict | None = None,
) -> CheckResult:
    """Check that ``invariants`` hold in every state reachable by ``init`` / ``next`` of
    the module at ``path`` (or an already loaded ``Module``)."""
    t0 = time.perf_counter()
    mod = path if isinstance(path, Module) else load_module(path)
    consts = solve_constants(mod, cinit, constants)
    inst = mod.instance(consts)
    mod.check_assumes(inst)
    names = list(mod.variables)
    if not names:
        raise TlaEvalError(f"module {mod.name} declares no VARIABLES")
    init_act = inst.actions(True).act(_parse(init))
    vc = inst.compiler("value")
    search = _Search(
        names=names,
        next=next,
        comps=inst.actions(False).components(_parse(next), label=next),
        invs=[(name, vc.comp(_parse(name), ROOT).fn) for name in invariants],
        blank=inst.blank(),
        max_depth=max_depth,
        max_states=max_states,
        check_deadlock=check_deadlock,
        progress=progress,
        t0=t0,
        result_kw=dict(variables=names, source=str(getattr(mod, "file", path)), constants=consts),
    )
    try:
        level = search.initial_states(init_act, init)
        return search.breadth_first(level)
    except _Finished as done:
        return done.result


class _Finished(Exception):
    """Unwinds the search once it has its result (a violation, a limit reached)."""

    def __init__(self, result: CheckResult) -> None:
        self.result = result


@dataclass
class _Search:
    """One breadth-first search: the states seen (each with its parent), and how to
    check, expand and report them. Methods raise _Finished with the result when the
    search stops early."""

    names: list[str]
    next: str  # the next-state action's name, for messages
    comps: list  # (label, action) of each disjunct of the next-state relation
    invs: list  # (name, compiled invariant)
    blank: object
    max_depth: int | None
    max_states: int
    check_deadlock: bool
    progress: object
    t0: float
    result_kw: dict
    seen: dict[tuple, tuple | None] = field(default_factory=dict)
    generated: int = 0

    def initial_states(self, init_act, init: str) -> list[tuple]:
        """The distinct initial states, each checked."""
        try:
            inits = init_act(self.blank, self.blank, ())
        except TlaError as ex:
            raise ex.with_context(f"while evaluating the initial predicate {init}") from None
        level: list[tuple] = []
        for st in inits:
            self.generated += 1
            if UNSET in st:
                missing = [v for v, x in zip(self.names, st, strict=True) if x is UNSET]
                raise TlaEvalError(f"{init} does not assign the variable(s) {', '.join(missing)}")
            if st in self.seen:
                continue
            if len(self.seen) >= self.max_states:
                raise _Finished(
                    self.finish("incomplete", depth=1, queue=len(level), msg="max_states reached")
                )
            self.seen[st] = None
            level.append(st)
            bad = self.violated(st, 0)
            if bad:
                raise _Finished(self.finish("violation", bad, st))
        return level

    def breadth_first(self, level: list[tuple]) -> CheckResult:
        """Level by level from `level`, until no new state, a violation or a limit."""
        depth = 1 if level else 0
        self._last_report = time.perf_counter()
        self._tick = 0
        lvl = 0
        while level:
            if self.max_depth is not None and lvl >= self.max_depth:
                return self.finish("ok", depth=depth, queue=len(level), bounded=True)
            nxt: list[tuple] = []
            for qi, s in enumerate(level):
                produced = self.expand(s, lvl, depth, len(level) - qi, nxt)
                if produced == 0 and self.check_deadlock:
                    return self.finish("violation", "deadlock", s)
                self._report_progress(depth, len(level) - qi - 1 + len(nxt))
            level = nxt
            lvl += 1
            if level:
                depth += 1
        if self.progress is not None:
            self.progress(len(self.seen), depth, 0)
        return self.finish("ok", depth=depth)

    def expand(self, s: tuple, lvl: int, depth: int, unexpanded: int, nxt: list[tuple]) -> int:
        """Add the new successors of `s` (at level `lvl`) to `nxt`, each checked; return
        how many successors the actions produced (new or not). `unexpanded`: the
        states of this level not expanded yet, `s` included (an incomplete result's
        queue)."""
        produced = 0
        for label, act in self.comps:
            try:
                succ = act(s, self.blank, ())
            except TlaError as ex:
                raise ex.with_context(
                    f"while computing the successors by {label or self.next} of a state at "
                    f"depth {lvl + 1}:\n" + _describe_state(self.names, s)
                ) from None
            except RecursionError:
                raise TlaEvalError(
                    f"{label or self.next} recursed too deeply",
                    context=_describe_state(self.names, s),
                ) from None
            for t in succ:
                self.generated += 1
                produced += 1
                if t in self.seen:
                    continue
                if UNSET in t:
                    missing = [v for v, x in zip(self.names, t, strict=True) if x is UNSET]
                    raise TlaEvalError(
                        f"the action {label or self.next} does not assign the variable(s) "
                        f"{', '.join(missing)}",
                        context="from the state\n" + _describe_state(self.names, s),
                    )
                if len(self.seen) >= self.max_states:
                    raise _Finished(
                        self.finish(
                            "incomplete",
                            depth=depth + 1,
                            queue=unexpanded + len(nxt),
                            msg=f"more than max_states={self.max_states} distinct states",
                        )
                    )
                self.seen[t] = s
                nxt.append(t)
                bad = self.violated(t, lvl + 1)
                if bad:
                    raise _Finished(self.finish("violation", bad, t))
        return produced

    def _report_progress(self, depth: int, queue: int) -> None:
        if self.progress is None:
            return
        self._tick += 1
        if self._tick >= 256:
            self._tick = 0
            now = time.perf_counter()
            if now - self._last_report >= 1.0:
                self._last_report = now
                self.progress(len(self.seen), depth, queue)

    def violated(self, st: tuple, level: int) -> str | None:
        """The name of the first invariant `st` violates, or None."""
        for name, inv in self.invs:
            try:
                v = inv(st, None, ())
            except TlaError as ex:
                raise ex.with_context(
                    f"while checking the invariant {name} in a state at depth {level + 1}:\n"
                    + _describe_state(self.names, st)
                ) from None
            except RecursionError:
                raise TlaEvalError(f"the invariant {name} recursed too deeply") from None
            if v is not True:
                if v is False:
                    return name
                raise TlaEvalError(
                    f"the invariant {name} is {fmt(v)}, not a boolean",
                    context=_describe_state(self.names, st),
                )
        return None

    def trace_to(self, st) -> list[tuple]:
        """The states from an initial state to `st`, by parent pointers (a shortest path)."""
        out = []
        while st is not None:
            out.append(st)
            st = self.seen[st]
        out.reverse()
        return out

    def labels_of(self, path_states) -> list[str | None]:
        """The action that led to each state of a path (None for the initial one)."""
        labels: list[str | None] = [None]
        for a, b in zip(path_states, path_states[1:], strict=False):
            found = None
            for label, act in self.comps:
                try:
                    if b in act(a, self.blank, ()):
                        found = label
                        break
                except TlaError:
                    continue
            labels.append(found)
        return labels

    def finish(self, verdict, invariant=None, bad=None, depth=0, queue=0, bounded=False, msg=""):
        trace = actions = None
        if bad is not None:
            p = self.trace_to(bad)
            trace = [dict(zip(self.names, st, strict=True)) for st in p]
            actions = self.labels_of(p)
            depth = len(p)
        return CheckResult(
            verdict=verdict,
            invariant=invariant,
            distinct_states=len(self.seen),
            states_generated=self.generated,
            depth=depth,
            seconds=time.perf_counter() - self.t0,
            trace=trace,
            actions=actions,
            max_depth=self.max_depth,
            bounded=bounded,
            queue=queue,
            message=msg,
            **self.result_kw,
        )
