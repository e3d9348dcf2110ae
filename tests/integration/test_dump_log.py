"""`kafkalab dump-log` as a user runs it: a real subprocess on files a log wrote."""

from __future__ import annotations

import subprocess
import sys

from kafkalab.records.control_record import ControlRecordType, build_end_txn_marker_batch
from kafkalab.records.memory_records import SimpleRecord, build_batch
from kafkalab.records.record import Header
from kafkalab.storage.log_config import LogConfig
from kafkalab.storage.unified_log import AppendOrigin, UnifiedLog


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafkalab", "dump-log", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def make_log(path):
    log = UnifiedLog(path, LogConfig(index_interval_bytes=50, segment_bytes=2000))
    for i in range(20):
        log.append_as_leader(
            build_batch(
                [
                    SimpleRecord(
                        f"value-{i}".encode(),
                        key=f"k{i}".encode(),
                        headers=(Header("trace", b"1"),),
                        timestamp=1000 + i,
                    )
                ],
                producer_id=42,
                producer_epoch=0,
                base_sequence=i,
            )
        )
    log.append_as_leader(
        build_end_txn_marker_batch(42, 0, ControlRecordType.COMMIT, 3),
        origin=AppendOrigin.COORDINATOR,
    )
    log.close()


def test_dump_log_prints_batches_records_and_checks_indexes(tmp_path):
    make_log(tmp_path / "orders-0")
    first = tmp_path / "orders-0" / "00000000000000000000.log"
    result = run(str(first), "--print-data-log")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"Dumping {first}"
    assert "baseOffset: 0 lastOffset: 0 count: 1" in lines[2]
    assert "producerId: 42" in lines[2] and "isvalid: true" in lines[2]
    assert "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 7 sequence: 0" in lines[3]
    assert "headerKeys: [trace]" in lines[3] and "payload: value-0" in lines[3]
    whole = run(str(tmp_path / "orders-0"), "--print-data-log")
    assert whole.returncode == 0, whole.stderr
    assert "endTxnMarker: COMMIT coordinatorEpoch: 3" in whole.stdout
    assert "offset: " in whole.stdout and "timestamp: " in whole.stdout  # index entries
    checked = run(str(tmp_path / "orders-0"), "--verify-index-only")
    assert checked.returncode == 0, checked.stderr
    assert not [line for line in checked.stdout.splitlines() if line.startswith("offset: ")]


def test_dump_log_reports_corruption_and_bad_index_entries(tmp_path):
    make_log(tmp_path / "orders-0")
    log_file = tmp_path / "orders-0" / "00000000000000000000.log"
    data = bytearray(log_file.read_bytes())
    data[-5] ^= 0xFF
    log_file.write_bytes(bytes(data) + b"\x00\x00\x00")
    index = tmp_path / "orders-0" / "00000000000000000000.index"
    raw = bytearray(index.read_bytes())
    assert len(raw) >= 16
    raw[12:16] = (3).to_bytes(4, "big")  # second entry now points inside a batch
    index.write_bytes(bytes(raw))
    result = run(str(log_file), str(index))
    assert result.returncode == 1
    assert "isvalid: false" in result.stdout
    assert "torn write" in result.stderr
    assert "not the start of a batch" in result.stderr
    missing = run(str(tmp_path / "nope.log"))
    assert missing.returncode == 1 and "no such file" in missing.stderr


def test_dump_log_prints_and_checks_the_txnindex(tmp_path):
    log = UnifiedLog(tmp_path / "t-0")
    txn = build_batch(
        [SimpleRecord(b"a"), SimpleRecord(b"b")],
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    log.append_as_leader(txn)  # 0-1
    log.append_as_leader(build_batch([b"plain"]))  # 2
    log.append_as_leader(
        build_end_txn_marker_batch(7, 0, ControlRecordType.ABORT, 1),
        origin=AppendOrigin.COORDINATOR,
    )  # 3
    log.close()
    index = tmp_path / "t-0" / "00000000000000000000.txnindex"
    out = run(str(index))
    assert out.returncode == 0, out.stderr
    assert "version: 0 producerId: 7 firstOffset: 0 lastOffset: 3 lastStableOffset: 4" in out.stdout
    whole = run(str(tmp_path / "t-0"))  # a directory includes its .txnindex files
    assert whole.returncode == 0 and "lastStableOffset: 4" in whole.stdout
    # An entry naming no ABORT marker in the log, and a torn entry, are problems.
    data = index.read_bytes()
    forged = bytearray(data)
    forged[18:26] = (2).to_bytes(8, "big")  # lastOffset 2: a plain batch
    index.write_bytes(bytes(forged) + data[:10])
    bad = run(str(index))
    assert bad.returncode == 1
    assert "which the log does not have" in bad.stderr
    assert "not a whole number of 34-byte entries" in bad.stderr
