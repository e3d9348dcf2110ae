"""`kafkalab produce`, `kafkalab consume`, `kafkalab topics`, `kafkalab groups`,
`kafkalab delete-records`: kcat-like tools (and kafka-topics.sh /
kafka-consumer-groups.sh / kafka-delete-records.sh-like ones) on the teaching client.

    printf 'k1:hello\\nk2:world\\n' | kafkalab produce -b 127.0.0.1:9092 -t demo -K :
    kafkalab consume -b 127.0.0.1:9092 -t demo -o beginning -e -f '%p/%o %k=%s\\n'
    kafkalab consume -b ... -t demo -o s@1700000000000 -c 10
    kafkalab consume -b ... -t demo -G my-group -o beginning -e   # as a group member
    kafkalab topics -b ... --create demo --partitions 3 --config retention.ms=60000
    kafkalab topics -b ... --alter --topic demo --partitions 6 [--replica-assignment 1:2,2:3,3:1]
    kafkalab delete-records -b ... --offset-json-file offsets.json
        (Kafka's format: {"partitions": [{"topic": "demo", "partition": 0, "offset": 10}],
         "version": 1}; offset -1: up to the high watermark)
    kafkalab groups -b ... --list | --describe G | --delete G
    kafkalab groups -b ... --reset-offsets G --topic demo --to-earliest --execute
    kafkalab consume -b ... -t demo -o beginning -e --isolation read_committed
    kafkalab transactions -b ... list | describe --transactional-id T
    kafkalab transactions -b ... describe-producers --topic demo --partition 0

Format tokens (as kcat's -f): %t topic, %p partition, %o offset, %k key, %s value,
%T timestamp, %h headers, %K key length, %S value length, \\n \\t.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from kafkalab.client.admin import Admin
from kafkalab.client.consumer import KafkaConsumer
from kafkalab.client.producer import KafkaProducer
from kafkalab.errors import Errors, KafkaError


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("produce", help="produce lines from stdin (kcat -P)")
    p.add_argument("-b", "--bootstrap-servers", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-p", "--partition", type=int)
    p.add_argument("-K", "--key-delimiter", help="split each line into key and value")
    p.add_argument("-H", "--header", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument(
        "-z", "--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"]
    )
    p.add_argument("--acks", default="all", choices=["0", "1", "all"])
    p.set_defaults(func=_produce)

    c = subparsers.add_parser("consume", help="print records (kcat -C)")
    c.add_argument("-b", "--bootstrap-servers", required=True)
    c.add_argument("-t", "--topic", required=True)
    c.add_argument(
        "-p", "--partition", type=int, action="append", help="partition(s) to read (default: all)"
    )
    c.add_argument(
        "-o",
        "--offset",
        default="end",
        help="beginning | end | N (absolute) | -N (N before the end) | s@TIMESTAMP_MS",
    )
    c.add_argument(
        "-G",
        "--group",
        help="read as a member of this consumer group (kcat -G): partitions come from the "
        "group, start at its committed offsets (else -o beginning|end), and are committed",
    )
    c.add_argument("-c", "--count", type=int, help="stop after this many records")
    c.add_argument("-e", "--exit", action="store_true", help="stop at the end of the partitions")
    c.add_argument("-f", "--format", default="%s\\n", help="output format (see kafkalab --help)")
    c.add_argument(
        "--isolation",
        default="read_uncommitted",
        choices=["read_uncommitted", "read_committed"],
        help="isolation.level: read_committed stops at the last stable offset and skips "
        "the records of aborted transactions",
    )
    c.set_defaults(func=_consume)

    t = subparsers.add_parser(
        "topics", help="list, create, delete topics, add partitions (kafka-topics.sh)"
    )
    t.add_argument("-b", "--bootstrap-servers", required=True)
    group = t.add_mutually_exclusive_group(required=True)
    group.add_argument("--list", action="store_true")
    group.add_argument("--create", metavar="TOPIC")
    group.add_argument("--delete", metavar="TOPIC")
    group.add_argument(
        "--alter", action="store_true", help="with --topic and --partitions: add partitions"
    )
    t.add_argument("--topic", help="with --alter: the topic")
    t.add_argument(
        "--partitions", type=int, help="with --create: how many (1); with --alter: the new count"
    )
    t.add_argument("--replication-factor", type=int, default=1)
    t.add_argument(
        "--replica-assignment",
        metavar="B:B,B:B",
        help="with --alter: the replicas of each new partition, as kafka-topics.sh takes them "
        "(partitions separated by commas, brokers by colons)",
    )
    t.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    t.set_defaults(func=_topics)

    r = subparsers.add_parser(
        "delete-records",
        help="move partitions' log start offsets forward (kafka-delete-records.sh)",
    )
    r.add_argument("-b", "--bootstrap-servers", required=True)
    r.add_argument(
        "--offset-json-file",
        required=True,
        help='{"partitions": [{"topic": T, "partition": P, "offset": O}], "version": 1}; '
        "offset -1 deletes up to the high watermark",
    )
    r.set_defaults(func=_delete_records)

    g = subparsers.add_parser("groups", help="list, describe, reset, delete consumer groups")
    g.add_argument("-b", "--bootstrap-servers", required=True)
    what = g.add_mutually_exclusive_group(required=True)
    what.add_argument("--list", action="store_true")
    what.add_argument("--describe", metavar="GROUP", help="members, committed offsets, lag")
    what.add_argument("--delete", metavar="GROUP", help="only a group with no members")
    what.add_argument("--reset-offsets", metavar="GROUP", help="only a group with no members")
    g.add_argument("--topic", help="with --reset-offsets: the topic (all its partitions)")
    to = g.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int)
    g.add_argument("--execute", action="store_true", help="with --reset-offsets: do it")
    g.set_defaults(func=_groups)

    x = subparsers.add_parser(
        "transactions", help="list and describe transactions, a partition's producers"
    )
    x.add_argument("-b", "--bootstrap-servers", required=True)
    verbs = x.add_subparsers(dest="verb", required=True)
    verbs.add_parser("list", help="every transactional id, its producer id and state")
    d = verbs.add_parser("describe", help="one transactional id, as its coordinator has it")
    d.add_argument("--transactional-id", required=True)
    dp = verbs.add_parser("describe-producers", help="a partition's producers (its leader's)")
    dp.add_argument("--topic", required=True)
    dp.add_argument("--partition", type=int, required=True)
    x.set_defaults(func=_transactions)


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"{what} {item!r}: expected KEY=VALUE")
        key, value = item.split("=", 1)
        out[key] = value
    return out


def _produce(args: argparse.Namespace) -> int:
    headers = [(k, v.encode()) for k, v in _pairs(args.header, "--header").items()]
    producer = KafkaProducer(
        {
            "bootstrap.servers": args.bootstrap_servers,
            "compression.type": args.compression,
            "acks": args.acks,
            "enable.idempotence": args.acks == "all",
        }
    )
    futures = []
    try:
        for line in sys.stdin.buffer:
            line = line.rstrip(b"\n")
            key = None
            if args.key_delimiter:
                sep = args.key_delimiter.encode()
                if sep in line:
                    key, line = line.split(sep, 1)
            futures.append(
                producer.send(
                    args.topic, value=line, key=key, partition=args.partition, headers=headers
                )
            )
        producer.flush()
        failed = [f.exception() for f in futures if f.exception() is not None]
    finally:
        producer.close()
    if failed:
        print(f"{len(failed)} of {len(futures)} records failed: {failed[0]}", file=sys.stderr)
        return 1
    print(f"produced {len(futures)} records to {args.topic}", file=sys.stderr)
    return 0


def _format(fmt: str, r) -> str:
    fmt = fmt.replace("\\n", "\n").replace("\\t", "\t")
    text = lambda b: "" if b is None else b.decode("utf-8", "replace")  # noqa: E731
    values = {
        "t": r.topic,
        "p": str(r.partition),
        "o": str(r.offset),
        "T": str(r.timestamp),
        "k": text(r.key),
        "s": text(r.value),
        "K": str(-1 if r.key is None else len(r.key)),
        "S": str(-1 if r.value is None else len(r.value)),
        "h": ",".join(f"{h.key}={text(h.value)}" for h in r.headers),
        "%": "%",
    }
    out, i = [], 0
    while i < len(fmt):
        if fmt[i] == "%" and i + 1 < len(fmt) and fmt[i + 1] in values:
            out.append(values[fmt[i + 1]])
            i += 2
        else:
            out.append(fmt[i])
            i += 1
    return "".join(out)


def _consume(args: argparse.Namespace) -> int:
    if args.group:
        return _consume_in_group(args)
    consumer = KafkaConsumer(
        {"bootstrap.servers": args.bootstrap_servers, "isolation.level": args.isolation}
    )
    try:
        partitions = args.partition
        if partitions is None:
            partitions = sorted(consumer.client.partitions_for(args.topic))
        tps = [(args.topic, p) for p in partitions]
        consumer.assign(tps)
        _seek(consumer, tps, args.offset)
        ends = consumer.end_offsets(tps) if args.exit else {}
        seen = 0
        while True:
            for record in consumer.poll(500):
                sys.stdout.write(_format(args.format, record))
                seen += 1
                if args.count is not None and seen >= args.count:
                    sys.stdout.flush()
                    return 0
            sys.stdout.flush()
            if args.exit and all(consumer.position(tp) >= end for tp, end in ends.items()):
                return 0
    except KeyboardInterrupt:
        return 130
    finally:
        consumer.close()


def _consume_in_group(args: argparse.Namespace) -> int:
    if args.offset not in ("beginning", "end") or args.partition:
        print("with -G, the group assigns partitions: use -o beginning|end only", file=sys.stderr)
        return 2
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": args.bootstrap_servers,
            "group.id": args.group,
            "auto.offset.reset": "earliest" if args.offset == "beginning" else "latest",
            "enable.auto.commit": False,  # we commit what we printed, not what poll() returned
            "isolation.level": args.isolation,
        }
    )
    consumer.subscribe([args.topic])
    printed: dict[tuple[str, int], int] = {}  # the next offset to read, per partition
    seen, committed_at = 0, time.monotonic()
    try:
        while True:
            for record in consumer.poll(500):
                sys.stdout.write(_format(args.format, record))
                printed[(record.topic, record.partition)] = record.offset + 1
                seen += 1
                if args.count is not None and seen >= args.count:
                    return 0
            sys.stdout.flush()
            if printed and time.monotonic() - committed_at > 5:
                consumer.commit(dict(printed))
                committed_at = time.monotonic()
            held = sorted(consumer.assignment())
            if args.exit and held:
                ends = consumer.end_offsets(held)
                if all(consumer.position(tp) >= end for tp, end in ends.items()):
                    return 0
    except KeyboardInterrupt:
        return 130
    finally:
        sys.stdout.flush()
        try:
            if printed:
                consumer.commit(dict(printed))
        finally:
            consumer.close()  # leaves the group


def _seek(consumer: KafkaConsumer, tps, spec: str) -> None:
    if spec == "beginning":
        consumer.seek_to_beginning(tps)
    elif spec == "end":
        consumer.seek_to_end(tps)
    elif spec.startswith("s@"):
        found = consumer.offsets_for_times({tp: int(spec[2:]) for tp in tps})
        ends = consumer.end_offsets(tps)
        for tp in tps:
            offset = found[tp][0]
            consumer.seek(tp, offset if offset >= 0 else ends[tp])
    else:
        n = int(spec)
        if n >= 0:
            for tp in tps:
                consumer.seek(tp, n)
        else:
            for tp, end in consumer.end_offsets(tps).items():
                consumer.seek(tp, max(0, end + n))


def _topics(args: argparse.Namespace) -> int:
    with Admin(args.bootstrap_servers) as admin:
        try:
            if args.list:
                for name, partitions in sorted(admin.list_topics().items()):
                    print(f"{name}\tpartitions={partitions}")
            elif args.create:
                admin.create_topic(
                    args.create,
                    1 if args.partitions is None else args.partitions,
                    args.replication_factor,
                    _pairs(args.config, "--config"),
                )
                print(f"created topic {args.create}")
            elif args.alter:
                if not args.topic or args.partitions is None:
                    print("error: --alter needs --topic and --partitions", file=sys.stderr)
                    return 1
                assignment = None
                if args.replica_assignment:
                    assignment = [
                        [int(b) for b in part.split(":")]
                        for part in args.replica_assignment.split(",")
                    ]
                admin.create_partitions(args.topic, args.partitions, assignment)
                print(f"partitions of topic {args.topic}: {args.partitions}")
            else:
                admin.delete_topic(args.delete)
                print(f"deleted topic {args.delete}")
        except KafkaError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    return 0


__all__ = ["add_subcommand"]


def _delete_records(args: argparse.Namespace) -> int:
    """kafka-delete-records.sh: the offsets from Kafka's JSON file, each partition's
    new low watermark or error printed as Kafka's tool prints them."""
    try:
        with open(args.offset_json_file, encoding="utf-8") as f:
            spec = json.load(f)
        offsets = {(p["topic"], int(p["partition"])): int(p["offset"]) for p in spec["partitions"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"error: {args.offset_json_file}: {e!r}", file=sys.stderr)
        return 1
    print("Executing records delete operation")
    with Admin(args.bootstrap_servers) as admin:
        results = admin.delete_records(offsets)
    print("Records delete operation completed:")
    failed = False
    for (topic, partition), result in sorted(results.items()):
        if isinstance(result, KafkaError):
            failed = True
            print(f"partition: {topic}-{partition}\terror: {result}")
        else:
            print(f"partition: {topic}-{partition}\tlow_watermark: {result}")
    return 1 if failed else 0


def _groups(args: argparse.Namespace) -> int:
    with Admin(args.bootstrap_servers) as admin:
        try:
            if args.list:
                for group_id, protocol_type in admin.list_groups():
                    print(f"{group_id}\t{protocol_type}")
            elif args.describe:
                _describe_group(admin, args.describe)
            elif args.delete:
                admin.delete_group(args.delete)
                print(f"deleted group {args.delete}")
            else:
                return _reset_offsets(admin, args)
        except KafkaError as e:
            print(e, file=sys.stderr)
            return 1
    return 0


def _describe_group(admin: Admin, group_id: str) -> None:
    """kafka-consumer-groups.sh --describe: a row per partition the group has
    committed or holds, with its lag behind the log end. A group of the KIP-848
    protocol is described with ConsumerGroupDescribe, a classic one with
    DescribeGroups (as the Kafka 4 tool does)."""
    try:
        group = admin.describe_consumer_group(group_id)
        header = (
            f"group {group_id}: {group.state}, consumer protocol (KIP-848), assignor "
            f"{group.assignor}, group epoch {group.group_epoch}, {len(group.members)} member(s)"
        )
    except KafkaError as e:
        if e.code != Errors.GROUP_ID_NOT_FOUND:
            raise
        group = admin.describe_group(group_id)
        header = (
            f"group {group_id}: {group.state}, protocol {group.protocol or '-'}, "
            f"{len(group.members)} member(s)"
        )
    committed = admin.group_offsets(group_id)
    owner = {tp: m for m in group.members for tp in m.partitions}
    partitions = sorted(set(committed) | set(owner))
    ends = admin.end_offsets(partitions)
    print(header)
    print("TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
    for tp in partitions:
        current = committed.get(tp)
        lag = "-" if current is None else ends[tp] - current
        m = owner.get(tp)
        who = "-\t-\t-" if m is None else f"{m.member_id}\t{m.host or '-'}\t{m.client_id}"
        print(f"{tp[0]}\t{tp[1]}\t{'-' if current is None else current}\t{ends[tp]}\t{lag}\t{who}")


def _reset_offsets(admin: Admin, args: argparse.Namespace) -> int:
    if not args.topic or not (args.to_earliest or args.to_latest or args.to_offset is not None):
        print(
            "--reset-offsets needs --topic and one of --to-earliest, --to-latest, --to-offset N",
            file=sys.stderr,
        )
        return 2
    partitions = [(args.topic, p) for p in sorted(admin.client.partitions_for(args.topic))]
    if args.to_offset is not None:
        target = dict.fromkeys(partitions, args.to_offset)
    else:
        target = admin.end_offsets(partitions, earliest=args.to_earliest)
    for (topic, partition), offset in target.items():
        print(f"{topic}\t{partition}\t{offset}")
    if not args.execute:
        print("(a dry run: add --execute to commit these offsets)")
        return 0
    admin.alter_group_offsets(args.reset_offsets, target)
    print(f"group {args.reset_offsets}: offsets reset")
    return 0


def _table(header: list[str], rows: list[list]) -> None:
    """Columns as kafka-transactions.sh prints them: a header, then one row each."""
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _transactions(args: argparse.Namespace) -> int:
    """kafka-transactions.sh list | describe | describe-producers."""
    with Admin(args.bootstrap_servers) as admin:
        try:
            if args.verb == "list":
                _table(
                    ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
                    [
                        [t.transactional_id, t.coordinator_id, t.producer_id, t.state]
                        for t in admin.list_transactions()
                    ],
                )
            elif args.verb == "describe":
                t = admin.describe_transaction(args.transactional_id)
                now = int(time.time() * 1000)
                _table(
                    [
                        "CoordinatorId",
                        "TransactionalId",
                        "ProducerId",
                        "ProducerEpoch",
                        "TransactionState",
                        "TransactionTimeoutMs",
                        "CurrentTransactionStartTimeMs",
                        "TransactionDurationMs",
                        "TopicPartitions",
                    ],
                    [
                        [
                            t.coordinator_id,
                            t.transactional_id,
                            t.producer_id,
                            t.producer_epoch,
                            t.state,
                            t.timeout_ms,
                            t.start_time_ms if t.start_time_ms >= 0 else "None",
                            now - t.start_time_ms if t.start_time_ms >= 0 else "None",
                            ",".join(f"{topic}-{p}" for topic, p in t.partitions),
                        ]
                    ],
                )
            else:
                _table(
                    [
                        "ProducerId",
                        "ProducerEpoch",
                        "LatestCoordinatorEpoch",
                        "LastSequence",
                        "LastTimestamp",
                        "CurrentTransactionStartOffset",
                    ],
                    [
                        [
                            p.producer_id,
                            p.producer_epoch,
                            p.coordinator_epoch,
                            p.last_sequence,
                            p.last_timestamp,
                            p.current_txn_start_offset
                            if p.current_txn_start_offset >= 0
                            else "None",
                        ]
                        for p in admin.describe_producers(args.topic, args.partition)
                    ],
                )
        except KafkaError as e:
            print(e, file=sys.stderr)
            return 1
    return 0
