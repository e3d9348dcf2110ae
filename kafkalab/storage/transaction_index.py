"""TransactionIndex: a segment's `.txnindex`, the aborted transactions whose ABORT marker it holds.

Kafka's classes: org.apache.kafka.storage.internals.log.TransactionIndex and
AbortedTxn. A read_committed fetch answers with the aborted transactions that
overlap the byte range it returns, so the consumer can drop their records; this
index is where the leader finds them without reading the log. Each entry is 34
bytes, big-endian:

    version           int16   0
    producerId        int64
    firstOffset       int64   the transaction's first offset in this partition
    lastOffset        int64   the offset of its ABORT marker
    lastStableOffset  int64   the LSO right after the abort (the first offset of
                              the oldest other open transaction, or lastOffset + 1)

An entry lives in the segment that holds its ABORT marker, so a transaction can
start in an earlier segment. Entries are in marker order: lastOffset strictly
increases. The file is created only when the first entry is written (a segment
with no aborted transaction has no `.txnindex`, as in Kafka).

The lastStableOffset lets a search stop early: once an entry's LSO is at or past
the end of the fetched range, every transaction that started before that end
has completed, and later entries cannot overlap the range.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafkalab.storage import durability_ledger
from kafkalab.storage.errors import CorruptIndexError

TXN_INDEX_FILE_SUFFIX = ".txnindex"
CURRENT_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
assert ENTRY_SIZE == 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction in a partition (Kafka: AbortedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int = -1

    def to_bytes(self) -> bytes:
        return _ENTRY.pack(
            CURRENT_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )

    @classmethod
    def from_bytes(cls, data: bytes | memoryview, pos: int = 0) -> AbortedTxn:
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version > CURRENT_VERSION:
            raise CorruptIndexError(
                f"aborted transaction entry version {version} is newer than {CURRENT_VERSION}, "
                "the only version kafkalab knows"
            )
        return cls(pid, first, last, lso)


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    """Entries overlapping a fetch range, and whether later segments need not be searched."""

    aborted: list[AbortedTxn]
    is_complete: bool


def txn_index_file(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / (f"{base_offset:020d}" + TXN_INDEX_FILE_SUFFIX + suffix)


class TransactionIndex:
    """The `.txnindex` of the segment starting at `start_offset` (created lazily)."""

    def __init__(self, path: str | os.PathLike, start_offset: int) -> None:
        self.path = Path(path)
        self.start_offset = start_offset
        self._entries: list[AbortedTxn] | None = None  # read on first use
        self._file = None

    # -- reading ------------------------------------------------------------------------------

    def _load(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            whole = len(data) - len(data) % ENTRY_SIZE
            self._entries = [AbortedTxn.from_bytes(data, p) for p in range(0, whole, ENTRY_SIZE)]
        return self._entries

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return list(self._load())

    def __iter__(self) -> Iterator[AbortedTxn]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    @property
    def last_offset(self) -> int | None:
        entries = self._load()
        return entries[-1].last_offset if entries else None

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> TxnIndexSearchResult:
        """Entries overlapping [fetch_offset, upper_bound_offset) (Kafka: collectAbortedTxns)."""
        out = []
        for txn in self._load():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(out, True)
        return TxnIndexSearchResult(out, False)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError for a torn entry, an entry before the segment, or
        entries out of order (Kafka checks the middle one)."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size % ENTRY_SIZE:
            raise CorruptIndexError(
                f"{self.path}: {size} bytes is not a whole number of {ENTRY_SIZE}-byte entries"
            )
        previous = None
        for txn in self._load():
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"{self.path}: aborted transaction {txn} ends before the segment's base "
                    f"offset {self.start_offset}"
                )
            if previous is not None and txn.last_offset <= previous:
                raise CorruptIndexError(f"{self.path}: entry {txn} is out of order")
            previous = txn.last_offset

    # -- writing ------------------------------------------------------------------------------

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; its ABORT marker must come after every entry's (Kafka: append)."""
        entries = self._load()
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"{self.path}: aborted transactions are appended in marker order, but "
                f"{txn.last_offset} is not after {entries[-1].last_offset}"
            )
        if self._file is None:
            self._file = open(self.path, "ab")  # noqa: SIM115 - kept open like the log
        self._file.write(txn.to_bytes())
        self._file.flush()
        entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose ABORT marker is at `offset` or later."""
        entries = self._load()
        keep = 0
        while keep < len(entries) and entries[keep].last_offset < offset:
            keep += 1
        if keep == len(entries) and not self._torn():
            return
        del entries[keep:]
        self._truncate_file(keep * ENTRY_SIZE)

    def reset(self) -> None:
        """Remove every entry (recovery rebuilds them)."""
        self._load().clear()
        self._truncate_file(0)

    def _torn(self) -> bool:
        try:
            return self.path.stat().st_size % ENTRY_SIZE != 0
        except FileNotFoundError:
            return False

    def _truncate_file(self, size: int) -> None:
        if self._file is not None:
            self._file.flush()
        if self.path.exists():
            os.truncate(self.path, size)

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            durability_ledger.file_synced(self.path, self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def rename_to(self, path: Path) -> None:
        """Rename the file (if it exists yet); later writes go to the new name."""
        self.close()
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def size_in_bytes(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path.name}, {len(self)} aborted)"


__all__ = [
    "ENTRY_SIZE",
    "TXN_INDEX_FILE_SUFFIX",
    "AbortedTxn",
    "TransactionIndex",
    "TxnIndexSearchResult",
    "txn_index_file",
]
