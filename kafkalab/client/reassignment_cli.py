"""`kafkalab leader-election` and `kafkalab reassign-partitions`: Kafka's
kafka-leader-election.sh and kafka-reassign-partitions.sh on the teaching Admin,
with Kafka's options, JSON files and messages.

    kafkalab leader-election -b ... --election-type preferred --all-topic-partitions
    kafkalab leader-election -b ... --election-type unclean --topic T --partition 0
    kafkalab reassign-partitions -b ... --generate --topics-to-move-json-file topics.json \\
        --broker-list 2,3        (topics.json: {"topics": [{"topic": "T"}], "version": 1})
    kafkalab reassign-partitions -b ... --execute --reassignment-json-file plan.json
        (plan.json: {"version": 1, "partitions": [{"topic": "T", "partition": 0,
         "replicas": [2, 3], "log_dirs": ["any", "any"]}]})
    kafkalab reassign-partitions -b ... --verify --reassignment-json-file plan.json
    kafkalab reassign-partitions -b ... --list | --cancel --reassignment-json-file plan.json

`--generate` proposes an assignment over the broker list the way Kafka's tool does,
on the client (AdminUtils' rack-unaware round robin, from a random broker, followers
shifted); it moves nothing. `--execute` prints the current assignment first (save it:
it is the plan to roll back with) and starts the moves; `--verify` says, a partition at
a time, whether its move is done.
"""

from __future__ import annotations

import argparse
import json
import random
import sys

from kafkalab.client.admin import Admin
from kafkalab.errors import Errors, KafkaError


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    e = subparsers.add_parser(
        "leader-election", help="elect preferred or unclean leaders (kafka-leader-election.sh)"
    )
    e.add_argument("-b", "--bootstrap-servers", "--bootstrap-server", required=True)
    e.add_argument("--election-type", required=True, choices=["preferred", "unclean"])
    e.add_argument("--topic")
    e.add_argument("--partition", type=int)
    e.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of the cluster"
    )
    e.add_argument(
        "--path-to-json-file",
        help='the partitions, as Kafka\'s file: {"partitions": [{"topic": "T", "partition": 0}]}',
    )
    e.set_defaults(func=_leader_election)

    r = subparsers.add_parser(
        "reassign-partitions", help="move replicas between brokers (kafka-reassign-partitions.sh)"
    )
    r.add_argument("-b", "--bootstrap-servers", "--bootstrap-server", required=True)
    action = r.add_mutually_exclusive_group(required=True)
    for name in ("generate", "execute", "verify", "cancel", "list"):
        action.add_argument(f"--{name}", action="store_true")
    r.add_argument("--topics-to-move-json-file", help="--generate: the topics to move")
    r.add_argument("--broker-list", help="--generate: the brokers to move them to, e.g. 1,2,3")
    r.add_argument("--reassignment-json-file", help="--execute/--verify/--cancel: the plan")
    r.set_defaults(func=_reassign_partitions)


# -- kafka-leader-election ----------------------------------------------------------------------


def _election_partitions(args: argparse.Namespace) -> list[tuple[str, int]] | None:
    if args.all_topic_partitions:
        return None
    if args.path_to_json_file:
        with open(args.path_to_json_file, encoding="utf-8") as f:
            return [(p["topic"], int(p["partition"])) for p in json.load(f)["partitions"]]
    if args.topic is None or args.partition is None:
        raise ValueError(
            "name the partitions: --topic and --partition, --all-topic-partitions or "
            "--path-to-json-file"
        )
    return [(args.topic, args.partition)]


def _leader_election(args: argparse.Namespace) -> int:
    try:
        partitions = _election_partitions(args)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    kind = args.election_type.upper()
    with Admin(args.bootstrap_servers) as admin:
        try:
            results = admin.elect_leaders(args.election_type, partitions)
        except KafkaError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    done = [tp for tp, error in sorted(results.items()) if error is None]
    noop = [
        tp
        for tp, error in sorted(results.items())
        if error is not None and error.code == Errors.ELECTION_NOT_NEEDED
    ]
    failed = {
        tp: error
        for tp, error in sorted(results.items())
        if error is not None and error.code != Errors.ELECTION_NOT_NEEDED
    }
    if done:
        print(f"Successfully completed leader election ({kind}) for partitions {_tps(done)}")
    if noop:
        print(f"Valid replica already elected for partitions {_tps(noop)}")
    for (topic, partition), error in failed.items():
        print(
            f"Error completing leader election ({kind}) for partition: {topic}-{partition}: {error}"
        )
    if failed:
        print(f"{len(failed)} replica(s) could not be elected", file=sys.stderr)
        return 1
    if not results and partitions is None:
        print("No leader election needed on any partition")
    return 0


def _tps(tps: list[tuple[str, int]]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in tps)


# -- kafka-reassign-partitions ------------------------------------------------------------------


def assignment_json(assignment: dict[tuple[str, int], list[int]]) -> str:
    """Kafka's reassignment JSON, on one line as its tool prints it."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": t,
                    "partition": p,
                    "replicas": replicas,
                    "log_dirs": ["any"] * len(replicas),
                }
                for (t, p), replicas in sorted(assignment.items())
            ],
        },
        separators=(",", ":"),
    )


def read_plan(path: str) -> dict[tuple[str, int], list[int]]:
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    plan = {}
    for p in spec["partitions"]:
        tp = (p["topic"], int(p["partition"]))
        if tp in plan:
            raise ValueError(f"partition {tp[0]}-{tp[1]} is named twice")
        plan[tp] = [int(r) for r in p["replicas"]]
    return plan


def propose(
    current: dict[tuple[str, int], list[int]], brokers: list[int], rng: random.Random
) -> dict[tuple[str, int], list[int]]:
    """Each topic spread over `brokers` with its replication factor, as Kafka's tool
    proposes (AdminUtils.assignReplicasToBrokers, rack unaware): the first replica of
    partition p on broker (start + p) mod n, the others after it at a shift that grows
    each time the partitions wrap around the brokers."""
    brokers, n = sorted(brokers), len(brokers)
    out = {}
    for topic in sorted({t for t, _ in current}):
        partitions = sorted(p for t, p in current if t == topic)
        factor = len(current[(topic, partitions[0])])
        if factor > n:
            raise ValueError(
                f"topic {topic} has replication factor {factor}, more than the {n} brokers given"
            )
        start, shift = rng.randrange(n), rng.randrange(n)
        for i, p in enumerate(partitions):
            if i > 0 and i % n == 0:
                shift += 1
            first = (i + start) % n
            replicas = [brokers[first]]
            for j in range(factor - 1):
                replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
            out[(topic, p)] = replicas
    return out


def _reassign_partitions(args: argparse.Namespace) -> int:
    try:
        with Admin(args.bootstrap_servers) as admin:
            if args.generate:
                return _generate(admin, args)
            if args.list:
                return _list(admin)
            if not args.reassignment_json_file:
                raise ValueError("--reassignment-json-file is required")
            plan = read_plan(args.reassignment_json_file)
            if args.execute:
                return _execute(admin, plan)
            if args.cancel:
                return _cancel(admin, plan)
            return _verify(admin, plan)
    except (OSError, ValueError, KeyError, TypeError, KafkaError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def _generate(admin: Admin, args: argparse.Namespace) -> int:
    if not args.topics_to_move_json_file or not args.broker_list:
        raise ValueError("--generate needs --topics-to-move-json-file and --broker-list")
    with open(args.topics_to_move_json_file, encoding="utf-8") as f:
        topics = [t["topic"] for t in json.load(f)["topics"]]
    brokers = [int(b) for b in args.broker_list.split(",")]
    current = admin.partition_replicas(topics)
    print("Current partition replica assignment")
    print(assignment_json(current))
    print()
    print("Proposed partition reassignment configuration")
    print(assignment_json(propose(current, brokers, random.Random())))
    return 0


def _execute(admin: Admin, plan: dict[tuple[str, int], list[int]]) -> int:
    current = admin.partition_replicas(sorted({t for t, _ in plan}))
    print("Current partition replica assignment")
    print()
    print(assignment_json({tp: current[tp] for tp in plan if tp in current}))
    print()
    print("Save this to use as the --reassignment-json-file option during rollback")
    results = admin.alter_partition_reassignments(dict(plan))
    failed = {tp: e for tp, e in results.items() if e is not None}
    for (topic, partition), error in sorted(failed.items()):
        print(f"Error reassigning partition(s): {topic}-{partition}: {error}", file=sys.stderr)
    started = sorted(tp for tp, e in results.items() if e is None)
    if started:
        print(f"Successfully started partition reassignments for {_tps(started).replace(' ', '')}")
    return 1 if failed else 0


def _verify(admin: Admin, plan: dict[tuple[str, int], list[int]]) -> int:
    ongoing = admin.list_partition_reassignments(sorted(plan))
    current = admin.partition_replicas(sorted({t for t, _ in plan}))
    print("Status of partition reassignment:")
    for (topic, partition), target in sorted(plan.items()):
        name = f"{topic}-{partition}"
        if (topic, partition) in ongoing:
            print(f"Reassignment of partition {name} is still in progress.")
        elif current.get((topic, partition)) == target:
            print(f"Reassignment of partition {name} is completed.")
        else:
            print(
                f"There is no active reassignment of partition {name}, but replica set is "
                f"{current.get((topic, partition))} rather than {target}."
            )
    return 0


def _cancel(admin: Admin, plan: dict[tuple[str, int], list[int]]) -> int:
    results = admin.alter_partition_reassignments(dict.fromkeys(plan))
    cancelled = sorted(tp for tp, e in results.items() if e is None)
    absent = sorted(
        tp
        for tp, e in results.items()
        if e is not None and e.code == Errors.NO_REASSIGNMENT_IN_PROGRESS
    )
    failed = {
        tp: e
        for tp, e in results.items()
        if e is not None and e.code != Errors.NO_REASSIGNMENT_IN_PROGRESS
    }
    if cancelled:
        print(f"Successfully cancelled partition reassignments for: {_tps(cancelled)}")
    if absent:
        print(f"None of the specified partition reassignments are active: {_tps(absent)}")
    for (topic, partition), error in sorted(failed.items()):
        print(f"Error cancelling reassignment of {topic}-{partition}: {error}", file=sys.stderr)
    return 1 if failed else 0


def _list(admin: Admin) -> int:
    ongoing = admin.list_partition_reassignments()
    if not ongoing:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for (topic, partition), r in sorted(ongoing.items()):
        print(
            f"{topic}-{partition}: replicas: {','.join(map(str, r.replicas))}. "
            f"adding: {','.join(map(str, r.adding_replicas))}. "
            f"removing: {','.join(map(str, r.removing_replicas))}."
        )
    return 0
