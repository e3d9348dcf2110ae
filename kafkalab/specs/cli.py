"""`kafkalab specs list|check|show|replay`: the TLA+ specs in specs/ on the command line.

    kafkalab specs list                                  # every configuration in specs/checks.toml
    kafkalab specs check                                 # all of them, built-in checker
    kafkalab specs check replication/high-watermark -v   # one, with its counterexample
    kafkalab specs check --checker apalache --length 12  # with Apalache, if installed
    kafkalab specs check --save DIR                      # write counterexamples as ITF
    kafkalab specs show TRACE.itf.json                   # the trace as a table
    kafkalab specs replay TRACE.itf.json                 # against kafkalab's Partition, its
                                                         # coordinator, or its Raft voters
    kafkalab specs replay KRAFT.itf.json --defects none  # a broken variant's trace on the
                                                         # correct Raft code: where it parts

check exits 0 when every verdict is the expected one (the correct variants
hold, the unsafe ones break the invariant they must), 1 otherwise, 2 when the
chosen checker cannot run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from kafkalab.specs.runner import ApalacheNotInstalled, load_checks, run_check


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("specs", help="check the TLA+ specs, show and replay traces")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    verbs.add_parser("list", help="the checked configurations")
    check = verbs.add_parser("check", help="check configurations (all by default)")
    check.add_argument("names", nargs="*", metavar="SPEC", help="e.g. replication/high-watermark")
    check.add_argument("--checker", choices=["builtin", "apalache"], default="builtin")
    check.add_argument("--length", type=int, help="at most this many steps")
    check.add_argument("--save", type=Path, metavar="DIR", help="write counterexamples here")
    check.add_argument("-v", "--verbose", action="store_true", help="the summary and the trace")
    show = verbs.add_parser("show", help="a trace as a table, step by step")
    show.add_argument("trace", type=Path)
    replay = verbs.add_parser("replay", help="replay a trace against kafkalab's own code")
    replay.add_argument("trace", type=Path)
    replay.add_argument("--rule", help="the truncation rule, if the trace does not say")
    replay.add_argument(
        "--defects",
        help="KafkaRaft traces: the kafkalab.raft defects to switch on, comma-separated "
        "(KAFKA-12619, KAFKA-10527) or 'none'; by default those of the trace's configuration",
    )
    parser.set_defaults(func=_main)


def kraft_table_of(path: Path, trace):
    """A KafkaRaft trace as a table, each step named by the action instance that
    takes it when the trace's MC file is one of specs/checks.toml's."""
    from kafkalab.specs.runner import CounterexampleDoesNotFollow, follow_trace
    from kafkalab.specs.trace_actions import KRAFT_ACTIONS
    from kafkalab.viz.traces import kraft_table

    source = Path(trace.meta.get("source", "")).name
    module = next((c.module for c in load_checks() if c.module.name == source), None)
    steps = None
    if module is not None:
        try:
            steps = follow_trace(module, json.loads(path.read_text()), KRAFT_ACTIONS)
        except CounterexampleDoesNotFollow:
            steps = None  # a trace of an older spec: shown as it is
    return kraft_table(trace, steps)


def _replay_kraft(args: argparse.Namespace) -> int:
    """A KafkaRaft trace on kafkalab's Raft voters (kafkalab.specs.kraft_replay)."""
    from kafkalab.specs.kraft_replay import replay_kraft

    defects = None
    if args.defects is not None:
        given = args.defects.strip()
        defects = () if given == "none" else [d.strip() for d in given.split(",") if d.strip()]
    try:
        report = replay_kraft(args.trace, defects)
    except ValueError as e:  # an unknown defect, or a trace of no specs/kraft MC file
        print(e, file=sys.stderr)
        return 2
    print(report.table().to_string())
    print(f"replayed {len(report.steps)} steps ({report.rule}): kafkalab did what the spec did")
    for v in report.violations:
        print(f"kafkalab's voters break {v}")
    return 0


def _progress(distinct: int, depth: int, queue: int) -> None:
    print(f"  ... {distinct:,} distinct states, depth {depth}, {queue:,} queued", file=sys.stderr)


def _main(args: argparse.Namespace) -> int:
    if args.verb == "list":
        for c in load_checks():
            print(f"{c.name}\t{c.module.name}\texpect {c.expect}")
        return 0
    if args.verb == "show":
        from kafkalab.specs.trace import load_trace
        from kafkalab.viz.traces import replication_table, transactions_table

        trace = load_trace(args.trace)
        if "votedFor" in trace.variables:
            print(kraft_table_of(args.trace, trace).to_string())
            return 0
        table = transactions_table if "coordinator" in trace.variables else replication_table
        print(table(trace).to_string())
        return 0
    if args.verb == "replay":
        from kafkalab.specs.replay import (
            ReplayMismatch,
            TransactionVersionNotServed,
            replay_replication,
            replay_transactions,
        )
        from kafkalab.specs.trace import load_trace

        trace = load_trace(args.trace)
        try:
            if "votedFor" in trace.variables:
                return _replay_kraft(args)
            if "coordinator" in trace.variables:
                report = replay_transactions(trace)
            else:
                report = replay_replication(trace, args.rule)
        except ReplayMismatch as e:
            print(e, file=sys.stderr)
            return 1
        except TransactionVersionNotServed as e:
            print(f"not replayed: {e}", file=sys.stderr)
            return 2
        print(report.table().to_string())
        print(f"replayed {len(report.steps)} steps: kafkalab did what the spec did")
        return 0
    checks = load_checks()
    known = {c.name: c for c in checks}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        print(f"unknown spec {unknown[0]!r}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    selected = [known[n] for n in args.names] or checks
    failures = 0
    started = time.perf_counter()
    for c in selected:
        try:
            result = run_check(c, args.checker, args.length, _progress if args.verbose else None)
        except ApalacheNotInstalled as e:
            print(e, file=sys.stderr)
            return 2
        print(result.line(), flush=True)
        if args.verbose:
            print(result.summary)
        failures += not result.as_expected
        if args.save and result.counterexample:
            args.save.mkdir(parents=True, exist_ok=True)
            path = args.save / (c.name.replace("/", "--") + ".itf.json")
            path.write_text(json.dumps(result.counterexample, indent=2) + "\n")
            print(f"  counterexample: {path}")
    print(
        f"{len(selected) - failures} of {len(selected)} as expected "
        f"({time.perf_counter() - started:.0f} s)"
    )
    return 1 if failures else 0
