"""`kafkalab cluster up|status|down|kill|stop|continue|restart --dir DIR`.

    kafkalab cluster up --brokers 3 --dir /tmp/k3      # last line: bootstrap.servers=...
    kafkalab cluster up --brokers 3 --controllers 3 --dir /tmp/k3   # a KRaft quorum
    kafkalab cluster kill 3001 --dir /tmp/k3           # SIGKILL controller 3001 (a voter)
    kafkalab cluster kill 2 --dir /tmp/k3              # SIGKILL broker 2
    kafkalab cluster power-failure 2 --dir /tmp/k3     # SIGKILL + lose what was not fsynced
    kafkalab cluster up --lazyfs --dir /tmp/k3         # every node keeps a durability ledger,
    kafkalab cluster power-failure 2 --lose-unsynced --seed 1 --dir /tmp/k3
                                                       # so that every file loses what was not
                                                       # fsynced (torn writes with a seed)
    kafkalab cluster stop 3 --dir /tmp/k3              # SIGSTOP (a hung broker)
    kafkalab cluster continue 3 --dir /tmp/k3          # SIGCONT
    kafkalab cluster restart 2 --dir /tmp/k3           # gracefully: leaderships move first
    kafkalab cluster restart --all --dir /tmp/k3       # a rolling restart
    kafkalab cluster cut 1 2 --dir /tmp/k3             # brokers 1 and 2 stop hearing each other
    kafkalab cluster cut 1 2 --one-way --dir /tmp/k3   # only 1 -> 2: broker 2 stops hearing 1
    kafkalab cluster cut 2 3001 --one-way --dir /tmp/k3  # controller 3001 stops hearing broker 2
    kafkalab cluster cut 1 2 --mode drop --dir /tmp/k3 # dropped, not refused: timeouts
    kafkalab cluster isolate-clients 1 --mode drop --client-id-prefix p1- --dir /tmp/k3
                                                       # broker 1 stops hearing clients p1-*
    kafkalab cluster heal --dir /tmp/k3                # every link back, every client
    kafkalab cluster clock 2 --step -3600 --dir /tmp/k3  # broker 2's wall clock an hour back
    kafkalab cluster clock 2 --skew 1.5 --dir /tmp/k3  # ... or running 1.5x fast (--reset)
    kafkalab cluster status --dir /tmp/k3              # processes, the quorum (and the
                                                       # controller each broker talks to),
                                                       # every partition replica, the
                                                       # reassignments in progress
    kafkalab cluster down --dir /tmp/k3                # no process is left behind

The processes run in the background; DIR/cluster.json remembers them (pids,
addresses, properties), and each one's output is in its data directory.

With --controllers 3 (or 5) the controllers are a KRaft quorum, voters with node ids
3001, 3002, ...: kill, power-failure, stop, continue and restart take a controller's
id as they take a broker's, and status shows the quorum as DescribeQuorum answers it
(leader, epoch, high watermark, each voter's log end offset and lag) and which
controller each broker talks to (the leader it follows: the brokers follow the
quorum's leader hints, kafkalab/server/controller_channel.py). The default
stays one controller process, as before (node id 3001 for `cut`). `cut` takes
controllers too: between two controllers it cuts their Raft traffic; a controller
deaf to a broker (`cut BROKER CONTROLLER --one-way`) drops that broker's requests, so
its heartbeats never arrive and it is fenced after the session timeout; a broker deaf
to a controller (`cut CONTROLLER BROKER --one-way`) throws that controller's answers
away: its heartbeats arrive and keep it unfenced, but it learns nothing and its
metadata goes stale. Both ways, both. (Between a broker and a controller a cut is
refused in --mode drop too: link_faults.py.)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from kafkalab.cluster.local_cluster import (
    DESCRIBE_COLUMNS,
    SINGLE_CONTROLLER_ID,
    LocalCluster,
    ProcessState,
    cut_to_recovery_points,
    describe_rows,
    process_state,
    under_replicated,
)
from kafkalab.controller.metadata_image import MetadataImage
from kafkalab.controller.metadata_record_serde import deserialize
from kafkalab.records import iter_batches
from kafkalab.server.broker import BrokerProcess
from kafkalab.server.clock import read_clock, reset_clock, skew_clock, step_clock
from kafkalab.server.controller_channel import read_controller_state
from kafkalab.server.link_faults import (
    CutMode,
    cut,
    heal,
    isolate_clients,
    read_clients_cut,
    read_cuts,
)
from kafkalab.server.quorum_meta_log_listener import metadata_image_log_dir
from kafkalab.storage import durability_ledger

STATE_FILE = "cluster.json"


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("cluster", help="a local controller + brokers, and faults")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    up = verbs.add_parser("up", help="start a controller and N brokers in the background")
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument(
        "--controllers",
        type=int,
        default=1,
        help="1: one controller process (the default); 3 or 5: a KRaft quorum",
    )
    up.add_argument("--broker-prop", action="append", default=[], metavar="KEY=VALUE")
    up.add_argument(
        "--lazyfs",
        action="store_true",
        help="every broker and controller keeps a durability ledger "
        "(kafkalab.lazyfs.enable=true), for power-failure --lose-unsynced",
    )
    for name in ("status", "down"):
        verbs.add_parser(name)
    cut = verbs.add_parser(
        "cut",
        help="cut the link between two brokers, two controllers, or a broker and a controller",
    )
    cut.add_argument("a", type=int)
    cut.add_argument("b", type=int)
    cut.add_argument("--one-way", action="store_true", help="only a -> b (b stops hearing a)")
    cut.add_argument(
        "--mode",
        choices=CutMode.values(),
        default=CutMode.REFUSE.value,
        help="refuse: connections closed at once (the default); drop: requests never "
        "answered, the sender waits for its request timeout",
    )
    isolate = verbs.add_parser(
        "isolate-clients", help="a broker stops hearing its clients (all, or by client.id)"
    )
    isolate.add_argument("broker", type=int)
    isolate.add_argument("--mode", choices=CutMode.values(), default=CutMode.REFUSE.value)
    isolate.add_argument(
        "--client-id-prefix", default=None, help="only clients whose client.id starts so"
    )
    verbs.add_parser("heal", help="restore every cut link, and every client")
    clock = verbs.add_parser(
        "clock", help="step or skew a node's wall clock (its timers stay monotonic)"
    )
    clock.add_argument("node", help="a broker's or controller's id (one controller: 3001)")
    how = clock.add_mutually_exclusive_group(required=True)
    how.add_argument("--step", type=float, metavar="SECONDS", help="jump (negative: back)")
    how.add_argument("--skew", type=float, metavar="RATE", help="run at RATE x real speed")
    how.add_argument("--reset", action="store_true", help="the real clock again")
    for name, what in (
        ("kill", "SIGKILL a broker"),
        ("power-failure", "SIGKILL, then lose what was not fsynced"),
        ("stop", "SIGSTOP (pause) a broker"),
        ("continue", "SIGCONT a paused broker"),
    ):
        verb = verbs.add_parser(name, help=what + " (or a quorum controller, by its id)")
        verb.add_argument("broker", type=int)
        if name == "power-failure":
            verb.add_argument(
                "--lose-unsynced",
                action="store_true",
                help="lazyfs's power failure: every file back to its last fsync, renames "
                "whose directory was not fsynced undone (needs `up --lazyfs`)",
            )
            verb.add_argument(
                "--seed", type=int, help="with --lose-unsynced: keep torn writes, chosen by it"
            )
    restart = verbs.add_parser(
        "restart", help="restart a broker gracefully (a controlled shutdown), or --all in turn"
    )
    restart.add_argument("broker", type=int, nargs="?")
    restart.add_argument(
        "--all",
        action="store_true",
        help="a rolling restart: each broker in turn, the next once no partition is "
        "under-replicated",
    )
    for verb in verbs.choices.values():
        verb.add_argument("--dir", type=Path, required=True, help="the cluster's directory")
    parser.set_defaults(func=_main)


def _state(directory: Path) -> dict:
    path = directory / STATE_FILE
    if not path.exists():
        raise SystemExit(f"no cluster in {directory} (run `kafkalab cluster up --dir {directory}`)")
    return json.loads(path.read_text())


def _save(directory: Path, state: dict) -> None:
    (directory / STATE_FILE).write_text(json.dumps(state, indent=2))


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _main(args: argparse.Namespace) -> int:
    directory = args.dir.resolve()
    if args.verb == "up":
        return _up(args, directory)
    state = _state(directory)
    return _VERBS.get(args.verb, _broker_signal)(args, directory, state)


def _up(args: argparse.Namespace, directory: Path) -> int:
    if (directory / STATE_FILE).exists():
        before = _state(directory)
        pids = [before["controller"]["pid"]] + [b["pid"] for b in before["brokers"].values()]
        pids += [c["pid"] for c in before.get("controllers", {}).values()]
        if any(process_state(pid) != ProcessState.DOWN for pid in pids):
            print(
                f"a cluster is already running in {directory}: see `kafkalab cluster "
                f"status --dir {directory}`, or stop it with `kafkalab cluster down "
                f"--dir {directory}` first",
                file=sys.stderr,
            )
            return 1
        # Every process is gone (killed, or the machine restarted): start again
        # on the same data, as brokers restarting after a crash would.
    props = dict(item.split("=", 1) for item in args.broker_prop)
    lazyfs = {durability_ledger.LAZYFS_ENABLE_CONFIG: "true"} if args.lazyfs else {}
    cluster = LocalCluster(
        brokers=args.brokers,
        base_dir=directory,
        broker_props={**lazyfs, **props},
        controller_props=lazyfs,
        outlive_parent=True,
        controllers=args.controllers,
    )
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    _save(
        directory,
        {
            "controller": {
                "pid": cluster.controller.process.pid,
                "address": cluster.controller.bootstrap_servers,
                "props": cluster.controller.props,
            },
            "brokers": {
                str(b): {"pid": p.process.pid, "address": p.bootstrap_servers, "props": p.props}
                for b, p in cluster.brokers.items()
            },
            "controllers": {
                str(c): {"pid": p.process.pid, "address": p.bootstrap_servers, "props": p.props}
                for c, p in cluster.controllers.items()
            },
        },
    )
    for b, p in cluster.brokers.items():
        print(f"broker {b}: {p.bootstrap_servers} (pid {p.process.pid})")
    if cluster.controllers:
        for c, p in cluster.controllers.items():
            print(f"controller {c}: {p.bootstrap_servers} (pid {p.process.pid})")
    else:
        print(f"controller: {cluster.controller.bootstrap_servers}")
    print(f"bootstrap.servers={cluster.bootstrap_servers}")
    return 0


def _brokers(state: dict) -> dict[int, dict]:
    return {int(b): info for b, info in state["brokers"].items()}


def _controllers(state: dict) -> dict[int, dict]:
    """A quorum's voters by node id (none with a single controller)."""
    return {int(c): info for c, info in state.get("controllers", {}).items()}


def _quorum_lines(controllers: dict[int, dict]) -> list[str]:
    """The quorum as its leader describes it (DescribeQuorum)."""
    from kafkalab.cluster.metadata_quorum import describe_quorum
    from kafkalab.errors import KafkaError

    addresses = [
        (info["address"].rsplit(":", 1)[0], int(info["address"].rsplit(":", 1)[1]))
        for _, info in sorted(controllers.items())
        if process_state(info["pid"]) == ProcessState.RUNNING
    ]
    try:
        q = describe_quorum(addresses, timeout_s=3)
    except KafkaError as e:
        return [f"quorum: no leader answers ({e.message})"]
    leo = {r.replica_id: r.log_end_offset for r in q.current_voters}
    lines = [
        f"quorum: leader {q.leader_id}, epoch {q.leader_epoch}, high watermark {q.high_watermark}"
    ]
    lines.append("voter\trole\tLEO\tlag")
    for voter in sorted(leo):
        role = "leader" if voter == q.leader_id else "follower"
        lines.append(f"{voter}\t{role}\t{leo[voter]}\t{leo[q.leader_id] - leo[voter]}")
    return lines


def _status(args: argparse.Namespace, directory: Path, state: dict) -> int:
    brokers = _brokers(state)
    controllers = _controllers(state)
    if controllers:
        for c, info in sorted(controllers.items()):
            line = _cuts_line(Path(info["props"]["log.dirs"]))
            print(f"controller {c}\t{info['address']}\t{process_state(info['pid'])}{line}")
    else:
        print(
            f"controller\t{state['controller']['address']}\t"
            f"{process_state(state['controller']['pid'])}"
            f"{_cuts_line(directory / 'controller')}"
        )
    for b, info in sorted(brokers.items()):
        line = _cuts_line(Path(info["props"]["log.dirs"]))
        print(f"broker {b}\t{info['address']}\t{process_state(info['pid'])}{line}")
    rows = describe_rows(
        {b: Path(info["props"]["log.dirs"]) for b, info in brokers.items()},
        {b: process_state(info["pid"]) for b, info in brokers.items()},
    )
    if controllers:
        print()
        print("\n".join(_quorum_lines(controllers)))
        print()
        print("\n".join(_brokers_controller_lines(brokers)))
    if rows:
        print()
        print("\t".join(DESCRIBE_COLUMNS))
        for r in rows:
            print("\t".join(str(r[c]) for c in DESCRIBE_COLUMNS))
    moving = reassignments_in_progress(directory / "controller")
    if moving:
        print()
        print("reassignments in progress (kafkalab reassign-partitions --verify)")
        print("topic\tpartition\treplicas\tadding\tremoving")
        for topic, p, replicas, adding, removing in moving:
            print(f"{topic}\t{p}\t{replicas}\t{adding}\t{removing}")
    return 0


def reassignments_in_progress(
    controller_dir: Path,
) -> list[tuple[str, int, list[int], list[int], list[int]]]:
    """(topic, partition, replicas, adding, removing) of every reassignment the
    controller's metadata log holds in progress: its files replayed, so it answers
    with brokers down too."""
    image = MetadataImage()
    for path in sorted(metadata_image_log_dir(controller_dir).glob("*.log")):
        for batch in iter_batches(path.read_bytes()):
            for r in batch.records:
                image.replay(deserialize(r.value, r.offset))
    return [
        (topic.name, p, part.replicas, part.adding_replicas, part.removing_replicas)
        for topic in image.topics.values()
        for p, part in sorted(topic.partitions.items())
        if part.adding_replicas or part.removing_replicas
    ]


def _cut(args: argparse.Namespace, directory: Path, state: dict) -> int:
    brokers = _brokers(state)
    controllers = _controllers(state) or _single_controller(state)
    nodes = {**brokers, **controllers}
    for b in (args.a, args.b):
        if b not in nodes:
            print(f"no broker or controller {b}; nodes: {sorted(nodes)}", file=sys.stderr)
            return 1
    pairs = [(args.a, args.b)] if args.one_way else [(args.a, args.b), (args.b, args.a)]
    for sender, receiver in pairs:
        cut(Path(nodes[receiver]["props"]["log.dirs"]), {sender}, args.mode)
        kind = "controller" if receiver in controllers else "broker"
        sender_kind = "controller" if sender in controllers else "broker"
        dropped = " (dropped)" if args.mode == CutMode.DROP else ""
        print(f"{kind} {receiver} no longer hears {sender_kind} {sender}{dropped}")
    return 0


def _isolate_clients(args: argparse.Namespace, directory: Path, state: dict) -> int:
    brokers = _brokers(state)
    if args.broker not in brokers:
        print(f"no broker {args.broker}; brokers: {sorted(brokers)}", file=sys.stderr)
        return 1
    isolate_clients(Path(brokers[args.broker]["props"]["log.dirs"]), args.mode,
                    args.client_id_prefix)  # fmt: skip
    which = f"clients {args.client_id_prefix}*" if args.client_id_prefix else "any client"
    print(f"broker {args.broker} no longer hears {which} ({args.mode})")
    return 0


def _brokers_controller_lines(brokers: dict[int, dict]) -> list[str]:
    """Which controller each broker talks to, as it last wrote (controller_channel.py's
    controller-channel.json): the leader it follows (or "-" while it looks for one),
    the epoch that leader was named in, the controllers it cannot reach."""
    lines = ["broker\tcontroller\tepoch\tunreachable"]
    for b, info in sorted(brokers.items()):
        state = read_controller_state(Path(info["props"]["log.dirs"]))
        if state is None:
            lines.append(f"{b}\t?\t\t")
            continue
        leader = state["leader"] if state["leader"] is not None else "-"
        lines.append(f"{b}\t{leader}\t{state['epoch']}\t{','.join(state['unreachable'])}")
    return lines


def _single_controller(state: dict) -> dict[int, dict]:
    """The single controller by its node id, for `cut` (none in a state written
    before its properties were kept)."""
    info = state.get("controller") or {}
    if "props" not in info:
        return {}
    return {int(info["props"].get("node.id", SINGLE_CONTROLLER_ID)): info}


def _heal(args: argparse.Namespace, directory: Path, state: dict) -> int:
    for info in [
        *_brokers(state).values(),
        *(_controllers(state) or _single_controller(state)).values(),
    ]:
        heal(Path(info["props"]["log.dirs"]))
    print("every link restored")
    return 0


def _clock(args: argparse.Namespace, directory: Path, state: dict) -> int:
    nodes = {str(n): Path(info["props"]["log.dirs"])
             for n, info in {**_brokers(state), **_controllers(state)}.items()}  # fmt: skip
    if not _controllers(state):
        nodes[str(SINGLE_CONTROLLER_ID)] = directory / "controller"
    if args.node not in nodes:
        print(f"no node {args.node}; nodes: {sorted(nodes)}", file=sys.stderr)
        return 1
    if args.reset:
        reset_clock(nodes[args.node])
        print(f"{args.node}: the real clock")
    elif args.step is not None:
        step_clock(nodes[args.node], args.step * 1000)
        print(f"{args.node}: clock stepped {args.step:+g} s")
    else:
        skew_clock(nodes[args.node], args.skew)
        print(f"{args.node}: clock runs at {args.skew:g}x")
    return 0


def _clock_line(log_dir: Path) -> str:
    """What `status` says of a node's clock faults ("" when none)."""
    state = read_clock(log_dir)
    parts = []
    if state["offset_ms"]:
        parts.append(f"{state['offset_ms'] / 1000:+g} s")
    if state["rate"] != 1:
        parts.append(f"{state['rate']:g}x")
    return f"\tclock {', '.join(parts)}" if parts else ""


def _cuts_line(log_dir: Path) -> str:
    """What `status` says of a node's cut links ("" when none)."""
    cuts = read_cuts(log_dir)
    dropped = sorted(n for n, m in cuts.items() if m == CutMode.DROP)
    line = f"\tdoes not hear {sorted(cuts)}" if cuts else ""
    line += f" (dropped: {dropped})" if dropped else ""
    clients = read_clients_cut(log_dir)
    if clients:
        prefix = clients.get("client_id_prefix")
        which = f"clients {prefix}*" if prefix else "clients"
        line += f"\tdoes not hear {which} ({clients['mode']})"
    return line + _clock_line(log_dir)


def _down(args: argparse.Namespace, directory: Path, state: dict) -> int:
    # Brokers first: each hands its leaderships over through the controller.
    brokers = _brokers(state)
    controllers = [info["pid"] for info in _controllers(state).values()]
    for pids in (
        [info["pid"] for info in brokers.values()],
        controllers or [state["controller"]["pid"]],
    ):
        _terminate(pids)
    (directory / STATE_FILE).unlink()
    print("cluster stopped")
    return 0


def _restart_verb(args: argparse.Namespace, directory: Path, state: dict) -> int:
    brokers = _brokers(state)
    if args.all == (args.broker is not None):
        print("restart: name one broker, or --all", file=sys.stderr)
        return 2
    controllers = _controllers(state)
    if args.broker in controllers:
        info = controllers[args.broker]
        _terminate([info["pid"]])
        process = BrokerProcess(info["props"], verb="controller", exit_with_parent=False).start()
        info.update(pid=process.process.pid, address=process.bootstrap_servers)
        _save(directory, state)
        print(f"controller {args.broker}: restart done", flush=True)
        return 0
    for b in sorted(brokers) if args.all else [args.broker]:
        if b not in brokers:
            print(f"no broker {b}; brokers: {sorted(brokers)}", file=sys.stderr)
            return 1
        if not _restart(brokers[b]):
            return 1
        _save(directory, state)
        if args.all:
            if not _wait_fully_replicated(brokers):
                print("partitions still under-replicated after 120 s", file=sys.stderr)
                return 1
        print(f"broker {b}: restart done", flush=True)
    return 0


def _broker_signal(args: argparse.Namespace, directory: Path, state: dict) -> int:
    """kill, power-failure, stop, continue: a signal to one broker (or controller)."""
    info = state["brokers"].get(str(args.broker))
    controller = state.get("controllers", {}).get(str(args.broker))
    if controller is not None:
        return _controller_signal(args, controller)
    if info is None:
        print(
            f"no broker {args.broker}; brokers: {', '.join(sorted(state['brokers']))}",
            file=sys.stderr,
        )
        return 1
    if args.verb == "kill":
        _signal(info["pid"], signal.SIGKILL)
    elif args.verb == "power-failure":
        _signal(info["pid"], signal.SIGKILL)
        while process_state(info["pid"]) != ProcessState.DOWN:
            time.sleep(0.05)
        if args.lose_unsynced:
            return _lose_unsynced(args, info, f"broker {args.broker}")
        cut = cut_to_recovery_points(Path(info["props"]["log.dirs"]))
        for partition, removed in cut.items():
            print(f"  {partition}: {removed} bytes written after the last fsync are gone")
    elif args.verb == "stop":
        _signal(info["pid"], signal.SIGSTOP)
    elif args.verb == "continue":
        _signal(info["pid"], signal.SIGCONT)
    print(f"broker {args.broker}: {args.verb} done")
    return 0


def _controller_signal(args: argparse.Namespace, info: dict) -> int:
    """kill, power-failure, stop, continue: a signal to one quorum controller."""
    from kafkalab.raft.kafka_metadata_log import cut_to_recovery_point

    if args.verb in ("kill", "power-failure"):
        _signal(info["pid"], signal.SIGKILL)
        if args.verb == "power-failure":
            while process_state(info["pid"]) != ProcessState.DOWN:
                time.sleep(0.05)
            if args.lose_unsynced:
                return _lose_unsynced(args, info, f"controller {args.broker}")
            removed = cut_to_recovery_point(Path(info["props"]["log.dirs"]))
            print(f"  __cluster_metadata-0: {removed} bytes written after the last fsync are gone")
    elif args.verb == "stop":
        _signal(info["pid"], signal.SIGSTOP)
    elif args.verb == "continue":
        _signal(info["pid"], signal.SIGCONT)
    print(f"controller {args.broker}: {args.verb} done")
    return 0


def _lose_unsynced(args: argparse.Namespace, info: dict, who: str) -> int:
    """power-failure --lose-unsynced of a killed node: its durability ledger decides."""
    ledger = durability_ledger.ledger_dir_for(Path(info["props"]["log.dirs"].split(",")[0]))
    if not (ledger / "roots.json").exists():
        print(
            f"{who} keeps no durability ledger ({ledger}): start the cluster with "
            "`kafkalab cluster up --lazyfs`; it was killed, nothing was cut",
            file=sys.stderr,
        )
        return 1
    report = durability_ledger.power_failure(ledger, seed=args.seed)
    for path, lost in sorted(report.cut.items()):
        print(f"  {path}: {lost} bytes not fsynced are gone")
    for path, kept in sorted(report.torn.items()):
        print(f"  {path}: a torn write, {kept} bytes of it kept")
    print(f"{who}: power-failure --lose-unsynced done")
    return 0


# The verbs after `up`, each given the parsed arguments, the directory and its state;
# the others (kill, power-failure, stop, continue) signal one broker.
_VERBS = {
    "status": _status,
    "cut": _cut,
    "isolate-clients": _isolate_clients,
    "clock": _clock,
    "heal": _heal,
    "down": _down,
    "restart": _restart_verb,
}


def _terminate(pids: list[int], timeout_s: float = 30) -> None:
    """SIGTERM (a graceful stop), then SIGKILL what is still there after `timeout_s`."""
    for pid in pids:
        _signal(pid, signal.SIGCONT)
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(process_state(p) != ProcessState.DOWN for p in pids):
        time.sleep(0.1)
    for pid in pids:
        _signal(pid, signal.SIGKILL)


def _restart(info: dict) -> bool:
    """Stop a broker gracefully and start it again on its data; updates `info`."""
    _terminate([info["pid"]])
    process = BrokerProcess(info["props"], exit_with_parent=False).start()
    if not process.wait_for_line("registered and unfenced", 60):
        print("".join(process.output), file=sys.stderr)
        return False
    info.update(pid=process.process.pid, address=process.bootstrap_servers)
    return True


def _wait_fully_replicated(brokers: dict[int, dict], timeout_s: float = 120) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rows = describe_rows(
            {b: Path(info["props"]["log.dirs"]) for b, info in brokers.items()},
            {b: process_state(info["pid"]) for b, info in brokers.items()},
        )
        if not under_replicated(rows):
            return True
        time.sleep(0.2)
    return False
