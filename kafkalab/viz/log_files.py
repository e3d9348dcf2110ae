"""Tables of a partition directory as it is on disk: files, batches, index entries.

These read the raw bytes with the header contract of kafkalab.records, not
through kafkalab.storage, so a lab can show what a file really holds, even a
damaged one, next to what the storage layer makes of it.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pandas as pd

from kafkalab.records import record_batch as rb

OFFSET_INDEX_ENTRY = struct.Struct(">ii")  # relative offset, position
TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
TXN_INDEX_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first, last, last stable

_KINDS = {
    ".log": "log segment (RecordBatch v2 frames)",
    ".index": "offset index (relative offset -> position)",
    ".timeindex": "time index (timestamp -> relative offset)",
    ".txnindex": "transaction index (aborted transactions)",
    ".snapshot": "producer state snapshot",
    ".deleted": "segment file awaiting deletion",
    ".cleaned": "compaction output in progress",
    ".swap": "compaction swap file",
}


def base_offset_of(path: str | Path) -> int | None:
    """Base offset encoded in a segment file name (20 zero-padded digits)."""
    stem = Path(path).name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else None


def log_files_table(directory: str | Path) -> pd.DataFrame:
    """Every file in a partition (or log) directory: name, kind, base offset, bytes."""
    rows = []
    for path in sorted(Path(directory).iterdir()):
        if path.is_dir():
            continue
        suffix = "".join(path.suffixes[-1:])
        rows.append(
            {
                "file": path.name,
                "kind": _KINDS.get(suffix, "metadata / checkpoint"),
                "base offset": base_offset_of(path),
                "bytes": path.stat().st_size,
            }
        )
    return pd.DataFrame(rows, columns=["file", "kind", "base offset", "bytes"])


def batches_table(log_path: str | Path) -> pd.DataFrame:
    """One row per batch of a .log file, read header by header.

    Stops at the first header that cannot be a batch or a batch cut short by the
    end of the file, and reports it in a last row (`status`), as recovery would
    see it.
    """
    data = Path(log_path).read_bytes()
    rows = []
    pos = 0
    while pos < len(data):
        try:
            header = rb.read_header(data, pos)
        except rb.CorruptRecordError as e:
            rows.append({"position": pos, "status": f"unreadable: {e}"})
            break
        size = header.size_in_bytes
        if pos + size > len(data):
            rows.append(
                {
                    "position": pos,
                    "base offset": header.base_offset,
                    "size": size,
                    "status": f"torn: {len(data) - pos} of {size} bytes present",
                }
            )
            break
        rows.append(
            {
                "position": pos,
                "base offset": header.base_offset,
                "last offset": header.last_offset,
                "records": header.records_count,
                "size": size,
                "max timestamp": header.max_timestamp,
                "epoch": header.partition_leader_epoch,
                "producer id": header.producer_id,
                "codec": header.compression_type.name.lower(),
                "control": header.is_control_batch,
                "status": "ok" if rb.is_valid(data, pos) else "CRC mismatch",
            }
        )
        pos += size
    return pd.DataFrame(rows)


def index_entries(index_path: str | Path) -> pd.DataFrame:
    """The entries of a .index, .timeindex or .txnindex file.

    Index files are preallocated and zero-filled; the entries end at the first
    all-zero slot (no real entry is all zeros: the first entry of a segment is
    written only after index.interval.bytes of data, so its position is > 0).
    """
    path = Path(index_path)
    if path.suffix == ".txnindex":
        return txn_index_entries(path)
    base = base_offset_of(path) or 0
    data = path.read_bytes()
    is_time = path.suffix == ".timeindex"
    entry = TIME_INDEX_ENTRY if is_time else OFFSET_INDEX_ENTRY
    rows = []
    for slot in range(len(data) // entry.size):
        first, second = entry.unpack_from(data, slot * entry.size)
        if first == 0 and second == 0:
            break
        if is_time:
            rows.append({"timestamp": first, "relative offset": second, "offset": base + second})
        else:
            rows.append({"relative offset": first, "offset": base + first, "position": second})
    columns = (
        ["timestamp", "relative offset", "offset"]
        if is_time
        else ["relative offset", "offset", "position"]
    )
    frame = pd.DataFrame(rows, columns=columns)
    frame.attrs["slots"] = len(data) // entry.size
    frame.attrs["file bytes"] = len(data)
    return frame


def txn_index_entries(index_path: str | Path) -> pd.DataFrame:
    """The aborted transactions of a `.txnindex` file: 34-byte entries of version,
    producer id, first offset, last offset (the ABORT marker), last stable offset.
    A torn last entry is left out (`attrs["torn bytes"]` says how many bytes)."""
    data = Path(index_path).read_bytes()
    size = TXN_INDEX_ENTRY.size
    columns = ["version", "producer id", "first offset", "last offset", "last stable offset"]
    rows = [
        dict(zip(columns, TXN_INDEX_ENTRY.unpack_from(data, pos), strict=True))
        for pos in range(0, len(data) - len(data) % size, size)
    ]
    frame = pd.DataFrame(rows, columns=columns)
    frame.attrs["file bytes"] = len(data)
    frame.attrs["torn bytes"] = len(data) % size
    return frame
