"""`kafkalab configs`: kafka-configs.sh on the teaching Admin, with its flags.

    kafkalab configs -b 127.0.0.1:9092 --describe --entity-type topics --entity-name demo
    kafkalab configs -b ... --describe --entity-type topics --entity-name demo --all
    kafkalab configs -b ... --alter --entity-type topics --entity-name demo \\
        --add-config retention.ms=60000,cleanup.policy=[compact,delete]
    kafkalab configs -b ... --alter --entity-type topics --entity-name demo \\
        --delete-config retention.ms
    kafkalab configs -b ... --describe --entity-type brokers --entity-name 1
    kafkalab configs -b ... --alter --entity-type brokers --entity-default \\
        --add-config min.insync.replicas=2

As kafka-configs.sh: --describe shows the dynamic configs (a topic's overrides, a
broker's dynamic configs), --all every config with its source; --alter sends one
IncrementalAlterConfigs (SET for --add-config, DELETE for --delete-config); a
value holding commas goes in brackets. --topic NAME, --broker ID and
--broker-defaults are the shortcuts kafka-configs.sh has too.
"""

from __future__ import annotations

import argparse
import sys

from kafkalab.client.admin import Admin, ConfigEntry
from kafkalab.errors import KafkaError

_DYNAMIC = ("DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG")


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    c = subparsers.add_parser(
        "configs", help="describe and alter topic and broker configs (kafka-configs.sh)"
    )
    c.add_argument("-b", "--bootstrap-server", "--bootstrap-servers", required=True, dest="bs")
    verb = c.add_mutually_exclusive_group(required=True)
    verb.add_argument("--describe", action="store_true")
    verb.add_argument("--alter", action="store_true")
    c.add_argument("--entity-type", choices=["topics", "brokers"])
    c.add_argument("--entity-name")
    c.add_argument(
        "--entity-default", action="store_true", help="the cluster-wide default of brokers"
    )
    c.add_argument("--topic", help="--entity-type topics --entity-name TOPIC")
    c.add_argument("--broker", help="--entity-type brokers --entity-name ID")
    c.add_argument("--broker-defaults", action="store_true", help="brokers, --entity-default")
    c.add_argument("--all", action="store_true", help="every config, not only dynamic ones")
    c.add_argument("--add-config", default="", metavar="K1=V1,K2=[V2,V3]")
    c.add_argument("--delete-config", default="", metavar="K1,K2")
    c.set_defaults(func=_configs)


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs.sh's --add-config: k=v pairs split on commas outside brackets;
    `[a,b]` is the value a,b."""
    out: dict[str, str] = {}
    item, depth = "", 0
    for ch in text + ",":
        if ch == "," and depth == 0:
            if item.strip():
                if "=" not in item:
                    raise ValueError(f"--add-config: {item!r} is not KEY=VALUE")
                key, value = item.split("=", 1)
                value = value.strip()
                if value.startswith("[") and value.endswith("]"):
                    value = value[1:-1]
                out[key.strip()] = value
            item = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        item += ch
    return out


def _entity(args: argparse.Namespace) -> tuple[str, str, str]:
    """(resource type, name, how kafka-configs.sh names it in its messages)."""
    if args.topic:
        return "topic", args.topic, f"topic {args.topic}"
    if args.broker:
        return "broker", args.broker, f"broker {args.broker}"
    if args.broker_defaults or (args.entity_type == "brokers" and args.entity_default):
        return "broker", "", "brokers in the cluster"
    if args.entity_type and args.entity_name:
        kind = args.entity_type[:-1]
        return kind, args.entity_name, f"{kind} {args.entity_name}"
    raise ValueError(
        "name the entity: --entity-type topics|brokers with --entity-name (or "
        "--entity-default for brokers), or --topic / --broker / --broker-defaults"
    )


def _format(entry: ConfigEntry) -> str:
    synonyms = ", ".join(f"{s}:{n}={v}" for n, v, s in entry.synonyms)
    return (
        f"  {entry.name}={entry.value if entry.value is not None else 'null'} "
        f"sensitive={str(entry.is_sensitive).lower()} synonyms={{{synonyms}}}"
    )


def _configs(args: argparse.Namespace) -> int:
    try:
        kind, name, label = _entity(args)
        adds = parse_add_config(args.add_config)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    deletes = [k.strip() for k in args.delete_config.split(",") if k.strip()]
    with Admin(args.bs) as admin:
        try:
            if args.alter:
                if not adds and not deletes:
                    print("error: --alter needs --add-config or --delete-config", file=sys.stderr)
                    return 2
                ops = [(k, "SET", v) for k, v in adds.items()]
                ops += [(k, "DELETE", None) for k in deletes]
                admin.incremental_alter_configs(kind, name, ops)
                if name == "" and kind == "broker":
                    print("Completed updating default config for brokers in the cluster.")
                else:
                    print(f"Completed updating config for {label}.")
                return 0
            entries = admin.describe_configs(kind, name)
        except KafkaError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    if name == "" and kind == "broker":
        print("Default configs for brokers in the cluster are:")
    else:
        print(f"{'All' if args.all else 'Dynamic'} configs for {label} are:")
    for entry in sorted(entries.values(), key=lambda e: e.name):
        if args.all or entry.source in _DYNAMIC:
            print(_format(entry))
    return 0


__all__ = ["add_subcommand", "parse_add_config"]
