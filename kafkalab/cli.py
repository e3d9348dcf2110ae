"""The `kafkalab` command line: one verb per tool, in the spirit of Kafka's bin/*.sh.

Each verb lives next to the code it drives and registers itself here through
an `add_subcommand(subparsers)` function that sets `func` on its parser:

    kafkalab dump-log PATH...        kafkalab.storage.dump_log_segments  (kafka-dump-log.sh)
    kafkalab broker CONFIG           kafkalab.server.broker  (kafka-server-start.sh)
    kafkalab controller CONFIG       kafkalab.server.controller_server  (a KRaft controller)
    kafkalab produce|consume|topics|groups|transactions
                                     kafkalab.client.cli  (kcat, kafka-topics.sh,
                                     kafka-consumer-groups.sh, kafka-transactions.sh)
    kafkalab leader-election|reassign-partitions
                                     kafkalab.client.reassignment_cli
                                     (kafka-leader-election.sh, kafka-reassign-partitions.sh)
    kafkalab configs --describe|--alter
                                     kafkalab.client.configs_cli  (kafka-configs.sh)
    kafkalab metadata-quorum ...     kafkalab.cluster.metadata_quorum  (kafka-metadata-quorum.sh)
    kafkalab cluster up|down|kill..  kafkalab.cluster.cli  (a local cluster and its faults)
    kafkalab specs check|show|replay kafkalab.specs.cli  (the TLA+ specs)
    kafkalab soak [--controllers 3] [--overlap]
                                     kafkalab.cluster.soak  (many faults, then the checker)
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Modules that contribute a verb. A module listed here that is missing is a bug,
# so import errors are not swallowed.
_VERB_MODULES = (
    "kafkalab.storage.dump_log_segments",
    "kafkalab.server.broker",
    "kafkalab.server.controller_server",
    "kafkalab.client.cli",
    "kafkalab.client.reassignment_cli",
    "kafkalab.client.configs_cli",
    "kafkalab.cluster.metadata_quorum",
    "kafkalab.cluster.cli",
    "kafkalab.specs.cli",
    "kafkalab.cluster.soak",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkalab",
        description="kafkalab: a small but complete Kafka to learn and check how Kafka works.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in _VERB_MODULES:
        importlib.import_module(name).add_subcommand(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `kafkalab dump-log ... | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
