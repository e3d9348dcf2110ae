"""`kafkalab dump-log PATH...`: print and check segment files, like kafka-dump-log.sh.

Kafka's tool: kafka.tools.DumpLogSegments. Give it `.log`, `.index`,
`.timeindex` or `.txnindex` files, a KRaft snapshot's `.checkpoint` file (record
batches too, from a SnapshotHeader to a SnapshotFooter), or a partition directory,
meaning every segment file in it:

    $ kafkalab dump-log /tmp/lab/orders-0/00000000000000000000.log --print-data-log
    Dumping /tmp/lab/orders-0/00000000000000000000.log
    Log starting offset: 0
    baseOffset: 0 lastOffset: 2 count: 3 ... position: 0 CreateTime: ... size: 98 ... isvalid: true
    | offset: 0 CreateTime: ... keySize: 1 valueSize: 5 sequence: -1 headerKeys: [] payload: hello

For an index it prints the entries and checks each against the log: an offset
index entry must point at the start of a batch whose last offset is the entry's
offset; a time index entry's offset must be in the log with a batch timestamp
that matches; a transaction index entry's lastOffset must be an ABORT marker of
its producer in the log, at or after its firstOffset. Mismatches are listed at the end and make the exit status 1.

`--cluster-metadata-decoder` reads a KRaft log (`__cluster_metadata-0`, a controller's
Raft log or its metadata-image log, and snapshot `.checkpoint` files) as Kafka's
`kafka-dump-log --cluster-metadata-decoder` does: each record's type, version and
fields, in Kafka's camelCase, as JSON:

    | offset: 3 CreateTime: ... payload: {"type":"PARTITION_RECORD","version":0,
      "data":{"partitionId":0,"topicId":"WcUtMkfhR9KP7yWkjjW0dQ","replicas":[1],...}}
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from kafkalab.records.record_batch import CorruptRecordError, ensure_valid
from kafkalab.storage.file_records import FileRecords
from kafkalab.storage.log_segment import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
)
from kafkalab.storage.offset_index import OffsetIndex
from kafkalab.storage.time_index import TimeIndex
from kafkalab.storage.transaction_index import (
    ENTRY_SIZE,
    TXN_INDEX_FILE_SUFFIX,
    AbortedTxn,
)

SNAPSHOT_FILE_SUFFIX = ".checkpoint"  # kafkalab/raft/snapshot.py names them

_CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _payload(data: bytes | None) -> str:
    if data is None:
        return "null"
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + data.hex()


RecordDecoder = Callable[[bytes | None, bytes | None], str]


def dump_log(
    path: Path,
    *,
    print_data_log: bool,
    problems: list[str],
    decoder: RecordDecoder | None = None,
) -> Iterator[str]:
    """Lines describing every batch of a `.log` file (and its records if asked;
    `decoder(key, value)` says what a record means, e.g. a __consumer_offsets one)."""
    from kafkalab.records.control_record import (
        ControlRecordType,
        control_record_type,
        parse_control_record,
    )
    from kafkalab.records.memory_records import decode_batch

    yield f"Dumping {path}"
    if path.suffix == SNAPSHOT_FILE_SUFFIX:  # `<end offset>-<epoch>.checkpoint` (KIP-630)
        end_offset, epoch = (int(part) for part in path.stem.split("-"))
        yield f"Snapshot end offset: {end_offset}, epoch: {epoch}"
    else:
        yield f"Log starting offset: {int(path.stem)}"
    records = FileRecords.open(path, mutable=False)
    valid_end = 0
    try:
        for position, header, data in records.batches_with_bytes(0):
            try:
                ensure_valid(data)
                valid = True
            except CorruptRecordError as e:
                valid = False
                problems.append(f"{path}: {e}")
            ts_name = "LogAppendTime" if header.timestamp_type else "CreateTime"
            yield (
                f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
                f"count: {header.records_count} baseSequence: {header.base_sequence} "
                f"lastSequence: {header.last_sequence} producerId: {header.producer_id} "
                f"producerEpoch: {header.producer_epoch} "
                f"partitionLeaderEpoch: {header.partition_leader_epoch} "
                f"isTransactional: {str(header.is_transactional).lower()} "
                f"isControl: {str(header.is_control_batch).lower()} "
                f"deleteHorizonMs: {'OptionalLong.empty' if not header.has_delete_horizon else header.base_timestamp} "
                f"position: {position} {ts_name}: {header.max_timestamp} "
                f"size: {header.size_in_bytes} magic: {header.magic} "
                f"compresscodec: {_CODEC_NAMES.get(header.compression_type, '?')} "
                f"crc: {header.crc} isvalid: {str(valid).lower()}"
            )
            valid_end = position + header.size_in_bytes
            if print_data_log and valid:
                batch = decode_batch(data)
                for record in batch.records:
                    line = (
                        f"| offset: {record.offset} {ts_name}: {record.timestamp} "
                        f"keySize: {-1 if record.key is None else len(record.key)} "
                        f"valueSize: {-1 if record.value is None else len(record.value)} "
                        f"sequence: {_record_sequence(header, record.offset)} "
                        f"headerKeys: [{','.join(h.key for h in record.headers)}]"
                    )
                    kind = control_record_type(record) if header.is_control_batch else None
                    if kind is not None and kind not in (
                        ControlRecordType.ABORT,
                        ControlRecordType.COMMIT,
                    ):  # KRaft's: LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER
                        line += f" controlType: {kind.name}({int(kind)})"
                    elif header.is_control_batch:
                        marker = parse_control_record(record)
                        line += (
                            f" endTxnMarker: {marker.type.name} "
                            f"coordinatorEpoch: {marker.coordinator_epoch}"
                        )
                    elif decoder is not None:
                        line += f" {decoder(record.key, record.value)}"
                    else:
                        if record.key is not None:
                            line += f" key: {_payload(record.key)}"
                        line += f" payload: {_payload(record.value)}"
                    yield line
    except CorruptRecordError as e:
        problems.append(f"{path}: {e}")
    finally:
        size = records.size_in_bytes()
        records.close()
    if valid_end < size:
        problems.append(
            f"{path}: {size - valid_end} bytes after position {valid_end} are not a whole "
            "batch (a torn write); recovery would cut them off"
        )
        yield f"Found {size - valid_end} invalid bytes at the end of {path.name}"


def _record_sequence(header, offset: int) -> int:
    if header.base_sequence < 0:
        return -1
    return (header.base_sequence + offset - header.base_offset) % 2**31


def _batches_by_position(log_path: Path) -> dict[int, tuple[int, int]]:
    """position -> (last offset, max timestamp) of each batch of a log file."""
    out = {}
    records = FileRecords.open(log_path, mutable=False)
    try:
        for position, header in records.batch_headers(0):
            out[position] = (header.last_offset, header.max_timestamp)
    except CorruptRecordError:
        pass
    finally:
        records.close()
    return out


def dump_offset_index(path: Path, *, verify_only: bool, problems: list[str]) -> Iterator[str]:
    """Entries of a `.index` file, each checked against the batch it points at."""
    yield f"Dumping {path}"
    base = int(path.stem)
    log_path = path.with_suffix(LOG_FILE_SUFFIX)
    batches = _batches_by_position(log_path) if log_path.exists() else None
    index = OffsetIndex(path, base, writable=False)
    try:
        for n in range(index.entries):
            entry = index.entry(n)
            if not verify_only:
                yield f"offset: {entry.offset} position: {entry.position}"
            if batches is None:
                continue
            found = batches.get(entry.position)
            if found is None:
                problems.append(
                    f"{path}: entry {n} (offset {entry.offset}) points at position "
                    f"{entry.position}, which is not the start of a batch"
                )
            elif found[0] != entry.offset:
                problems.append(
                    f"{path}: Index offset: {entry.offset}, log offset: {found[0]} "
                    f"(position {entry.position})"
                )
    finally:
        index.close()
    if batches is None:
        yield f"(no {log_path.name} next to it: entries not checked)"


def dump_time_index(path: Path, *, verify_only: bool, problems: list[str]) -> Iterator[str]:
    """Entries of a `.timeindex` file, checked for order and against the log."""
    yield f"Dumping {path}"
    base = int(path.stem)
    log_path = path.with_suffix(LOG_FILE_SUFFIX)
    batches = _batches_by_position(log_path) if log_path.exists() else None
    max_ts_upto: list[tuple[int, int]] = []  # (last offset, max timestamp so far)
    running = -1
    for _, (last_offset, ts) in sorted((batches or {}).items()):
        running = max(running, ts)
        max_ts_upto.append((last_offset, running))
    index = TimeIndex(path, base, writable=False)
    try:
        previous = -1
        for n in range(index.entries):
            entry = index.entry(n)
            if not verify_only:
                yield f"timestamp: {entry.timestamp} offset: {entry.offset}"
            if entry.timestamp <= previous:
                problems.append(
                    f"{path}: Found out of order timestamp {entry.timestamp} at entry {n}, "
                    f"previous {previous}"
                )
            previous = entry.timestamp
            if batches is None:
                continue
            match = [ts for last, ts in max_ts_upto if last == entry.offset]
            if not match:
                problems.append(
                    f"{path}: entry {n} names offset {entry.offset}, which is no batch's last "
                    "offset in the log"
                )
            elif match[0] != entry.timestamp:
                problems.append(
                    f"{path}: Found timestamp mismatch: index timestamp {entry.timestamp}, "
                    f"log max timestamp up to offset {entry.offset} is {match[0]}"
                )
    finally:
        index.close()


def _abort_markers(log_path: Path) -> dict[int, int]:
    """Offset -> producer id of every ABORT marker in a `.log` file."""
    from kafkalab.records.control_record import ControlRecordType, read_end_txn_marker

    out: dict[int, int] = {}
    records = FileRecords.open(log_path, mutable=False)
    try:
        for position, header in records.batch_headers(0):
            if not header.is_control_batch:
                continue
            data = records.read(position, header.size_in_bytes)
            try:
                marker = read_end_txn_marker(data, 0, header)
            except CorruptRecordError:
                continue
            if marker is not None and marker.type == ControlRecordType.ABORT:
                out[header.last_offset] = header.producer_id
    except CorruptRecordError:
        pass
    finally:
        records.close()
    return out


def dump_txn_index(path: Path, *, verify_only: bool, problems: list[str]) -> Iterator[str]:
    """Entries of a `.txnindex` file (Kafka's line for each), checked for order and
    against the ABORT markers in the log."""
    yield f"Dumping {path}"
    base = int(path.stem)
    log_path = path.with_suffix(LOG_FILE_SUFFIX)
    aborts = _abort_markers(log_path) if log_path.exists() else None
    data = path.read_bytes()
    if len(data) % ENTRY_SIZE:
        problems.append(
            f"{path}: {len(data)} bytes is not a whole number of {ENTRY_SIZE}-byte entries "
            "(a torn write?)"
        )
    previous = None
    for n, pos in enumerate(range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE)):
        version = int.from_bytes(data[pos : pos + 2], "big", signed=True)
        txn = AbortedTxn.from_bytes(data, pos) if version == 0 else None
        if txn is None:
            problems.append(f"{path}: entry {n} has version {version}; only 0 exists")
            continue
        if not verify_only:
            yield (
                f"version: {version} producerId: {txn.producer_id} firstOffset: "
                f"{txn.first_offset} lastOffset: {txn.last_offset} lastStableOffset: "
                f"{txn.last_stable_offset}"
            )
        if txn.last_offset < base or txn.first_offset > txn.last_offset:
            problems.append(f"{path}: entry {n} {txn} does not fit the segment starting at {base}")
        if previous is not None and txn.last_offset <= previous:
            problems.append(f"{path}: entry {n} {txn} is out of order")
        previous = txn.last_offset
        if aborts is not None and aborts.get(txn.last_offset) != txn.producer_id:
            problems.append(
                f"{path}: entry {n} names an ABORT marker of producer {txn.producer_id} at "
                f"offset {txn.last_offset}, which the log does not have"
            )
    if aborts is None:
        yield f"(no {log_path.name} next to it: entries not checked)"


def dump_paths(
    paths: list[Path],
    *,
    print_data_log: bool = False,
    verify_index_only: bool = False,
    decoder: RecordDecoder | None = None,
) -> tuple[list[str], list[str]]:
    """Dump every file (directories expand to their segment files).
    Returns (lines, problems)."""
    problems: list[str] = []
    lines: list[str] = []
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            order = {
                LOG_FILE_SUFFIX: 0,
                INDEX_FILE_SUFFIX: 1,
                TIME_INDEX_FILE_SUFFIX: 2,
                TXN_INDEX_FILE_SUFFIX: 3,
            }
            files += sorted(
                (p for p in path.iterdir() if p.suffix in order),
                key=lambda p: (p.stem, order[p.suffix]),
            )
        else:
            files.append(path)
    for path in files:
        if not path.exists():
            problems.append(f"{path}: no such file")
            continue
        if path.suffix in (LOG_FILE_SUFFIX, SNAPSHOT_FILE_SUFFIX):
            lines += dump_log(
                path, print_data_log=print_data_log, problems=problems, decoder=decoder
            )
        elif path.suffix == INDEX_FILE_SUFFIX:
            lines += dump_offset_index(path, verify_only=verify_index_only, problems=problems)
        elif path.suffix == TIME_INDEX_FILE_SUFFIX:
            lines += dump_time_index(path, verify_only=verify_index_only, problems=problems)
        elif path.suffix == TXN_INDEX_FILE_SUFFIX:
            lines += dump_txn_index(path, verify_only=verify_index_only, problems=problems)
        else:
            problems.append(
                f"{path}: not a segment file; give .log, .index, .timeindex, .txnindex "
                "or .checkpoint files"
            )
    return lines, problems


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dump-log",
        help="print and check segment files (kafka-dump-log.sh)",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help=".log/.index/.timeindex/.txnindex files or partition directories",
    )
    parser.add_argument(
        "--print-data-log",
        action="store_true",
        help="also print each record (offset, timestamp, key, payload)",
    )
    parser.add_argument(
        "--verify-index-only",
        action="store_true",
        help="check index entries against the log without printing them",
    )
    parser.add_argument(
        "--offsets-decoder",
        action="store_true",
        help="decode __consumer_offsets records: committed offsets and group metadata "
        "(implies --print-data-log)",
    )
    parser.add_argument(
        "--cluster-metadata-decoder",
        action="store_true",
        help="decode KRaft metadata records (__cluster_metadata-0 segments and snapshot "
        ".checkpoint files) as Kafka's tool does: each record's type, version and fields "
        "as JSON (implies --print-data-log)",
    )
    parser.add_argument(
        "--transaction-log-decoder",
        action="store_true",
        help="decode __transaction_state records: each transactional id's producer id, "
        "epoch, state and partitions (implies --print-data-log)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    decoder = None
    if args.offsets_decoder:
        # The command line is a tool at the top of the house (Kafka: kafka.tools.
        # DumpLogSegments), so it may know the coordinator's record formats.
        from kafkalab.coordinator.group.coordinator_records import describe_record

        decoder = describe_record
    elif args.cluster_metadata_decoder:
        from kafkalab.controller.metadata_record_serde import describe_record as describe_metadata

        decoder = describe_metadata
    elif args.transaction_log_decoder:
        from kafkalab.coordinator.transaction.transaction_log import (
            describe_record as describe_txn_record,
        )

        decoder = describe_txn_record
    lines, problems = dump_paths(
        args.paths,
        print_data_log=args.print_data_log or decoder is not None,
        verify_index_only=args.verify_index_only,
        decoder=decoder,
    )
    for line in lines:
        print(line)
    if problems:
        print(f"\n{len(problems)} problem(s) found:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    return 0
