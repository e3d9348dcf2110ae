"""DurabilityLedger: what of a process's files would survive a power failure, as
lazyfs (Jepsen's FUSE filesystem with its own page cache) decides it.

A write reaches the page cache; only fsync makes a file's bytes durable, and only
an fsync of its directory makes a new name, a rename or a removal durable. At a
power failure lazyfs drops everything else: each file goes back to what it held at
its last fsync, a rename whose directory was not fsynced is undone (the old file
under the name, or none), a file created since the directory's last fsync is gone.

kafkalab keeps the ledger only when asked (`kafkalab.lazyfs.enable=true` on a broker
or a controller; `install`): every fsync in the storage layer (`file_synced`) copies
the file's content as it is now (keyed by its inode: a rename keeps it, so an fsync
before a rename counts for the new name), every directory fsync (`dir_synced`)
records the directory's names and inodes. Off, the hooks cost one global lookup.
The ledger lives beside the process's first data directory (`<dir>.lazyfs`); it
is written without fsync (a SIGKILL keeps the page cache: what the ledger was told
is there for the harness to read).

`power_failure(ledger_dir)` is the crash, applied by the harness to a killed
process's directories: every directory takes its durable names back (names not in
it are removed; a directory never fsynced is emptied), every file its durable
content (a file named durably but never fsynced is empty). With a `seed`, a
`.log` file that only grew since its fsync may keep a prefix of what it was
given since (a torn write: part of a batch); recovery must cut it (CRC, length).

Not modelled: removals are kept (a file deleted before the crash does not come
back); files present when the ledger is installed count as durable as they are
(the process before this one is assumed to have had its data written back);
`FILES_NOT_GOVERNED` (the harness's own files, the process's console and config)
are left alone. The ledger pins every inode it saw with a hard link under
`pins/`, so that a deleted file's inode number is not reused while the ledger
knows it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

#: the process config that turns the ledger on (brokers and controllers)
LAZYFS_ENABLE_CONFIG = "kafkalab.lazyfs.enable"

#: files in a data directory that are not the process's data: the harness's and
#: the console's; a power failure leaves them as they are (the names of
#: kafkalab.server's events, link_faults, clock and replica_state files)
FILES_NOT_GOVERNED = frozenset(
    {
        ".lock",
        "clock.json",
        "clock.json.tmp",
        "broker.out",
        "controller.out",
        "broker.properties",
        "controller.properties",
        "events.jsonl",
        "link-faults.json",
        "link-faults.json.tmp",
        "replica-state.json",
        "replica-state.tmp",
    }
)

_LEDGER: DurabilityLedger | None = None


def ledger_dir_for(data_dir: str | Path) -> Path:
    """Where a process whose first data directory is `data_dir` keeps its ledger."""
    data_dir = Path(data_dir).absolute()
    return data_dir.with_name(data_dir.name + ".lazyfs")


def install(ledger_dir: str | Path, roots: Iterable[str | Path]) -> DurabilityLedger:
    """Keep a ledger for this process's files under `roots` from now on."""
    global _LEDGER
    ledger_dir = Path(ledger_dir)
    if ledger_dir.exists():  # the last run's: what it knew is on disk now
        _remove(ledger_dir)
    _LEDGER = DurabilityLedger(ledger_dir, [Path(r) for r in roots])
    _LEDGER.baseline()
    return _LEDGER


def data_dirs(props: dict[str, str]) -> list[Path]:
    """A broker's or controller's data directories, from its properties."""
    dirs = props.get("log.dirs", props.get("log.dir", "/tmp/kafkalab-logs"))
    out = [Path(d.strip()) for d in dirs.split(",") if d.strip()]
    meta = props.get("metadata.log.dir")
    if meta and Path(meta) not in out:
        out.append(Path(meta))
    return out


def install_for(props: dict[str, str]) -> DurabilityLedger:
    """`kafkalab.lazyfs.enable=true`: the ledger of a broker or controller with these
    properties, beside its first data directory (`ledger_dir_for`)."""
    dirs = data_dirs(props)
    return install(ledger_dir_for(dirs[0]), dirs)


def attach(ledger_dir: str | Path) -> DurabilityLedger:
    """Record into a ledger another process installed (a broker's cleaner process):
    no baseline, nothing cleared."""
    global _LEDGER
    ledger_dir = Path(ledger_dir)
    roots = json.loads((ledger_dir / "roots.json").read_text())
    _LEDGER = DurabilityLedger(ledger_dir, [Path(r) for r in roots])
    return _LEDGER


def uninstall() -> None:
    global _LEDGER
    _LEDGER = None


def installed() -> DurabilityLedger | None:
    return _LEDGER


def file_synced(path: str | Path, fd: int, *, append_only: bool = False) -> None:
    """Called after fsync(fd) of the file `path`: its content now is durable."""
    ledger = _LEDGER
    if ledger is not None:
        with ledger._lock:
            ledger.file_synced(Path(path), fd, append_only=append_only)


def file_rewritten(fd: int) -> None:
    """Called when a file that otherwise only grows was cut (a log truncation)."""
    ledger = _LEDGER
    if ledger is not None:
        with ledger._lock:
            ledger.file_rewritten(fd)


def dir_synced(path: str | Path) -> None:
    """Called after fsync of the directory `path`: its names now are durable."""
    ledger = _LEDGER
    if ledger is not None:
        with ledger._lock:
            ledger.dir_synced(Path(path))


def _dir_key(path: Path) -> str:
    return hashlib.sha1(str(path).encode()).hexdigest()


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _read_data(fd: int, size: int) -> bytes:
    """The file's bytes, read up to where only holes follow (an index is
    preallocated sparse: megabytes of holes after a few entries)."""
    end = size
    try:
        end = os.lseek(fd, 0, os.SEEK_HOLE)
        os.lseek(fd, end, os.SEEK_DATA)  # more data after the hole: read all of it
        end = size
    except OSError:  # ENXIO: holes only from `end` on; or no SEEK_HOLE here
        pass
    return os.pread(fd, end, 0) if end else b""


def _listing(directory: Path) -> dict[str, int]:
    out = {}
    for entry in os.scandir(directory):
        if entry.name not in FILES_NOT_GOVERNED:
            out[entry.name] = entry.inode()
    return out


@dataclass
class DurabilityLedger:
    """The durable state of the files under `roots`, kept in `directory`:
    `data/<inode>` (content at the last fsync, trailing zeros trimmed, size in
    `data/<inode>.size`), `dirs/<hash>.json` (names at the last directory fsync),
    `pins/<inode>` (hard links keeping inode numbers from being reused)."""

    directory: Path
    roots: list[Path] = field(default_factory=list)
    # inode -> bytes recorded, for files that only grow (`file_synced(append_only=True)`)
    _append_only: dict[int, int] = field(default_factory=dict)
    # a LogManager's writer thread fsyncs segments while the log's thread truncates
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def __post_init__(self) -> None:
        self.directory = self.directory.absolute()
        self.roots = [r.absolute() for r in self.roots]
        for sub in ("data", "dirs", "pins"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        _write_atomically(
            self.directory / "roots.json", json.dumps([str(r) for r in self.roots]).encode()
        )

    # -- what the process reports ------------------------------------------------------

    def baseline(self) -> None:
        """Everything already under the roots counts as durable as it is."""
        for root in self.roots:
            if not root.is_dir():
                continue
            for dirpath, _dirnames, filenames in os.walk(root):
                here = Path(dirpath)
                self.dir_synced(here)
                for name in filenames:
                    if name in FILES_NOT_GOVERNED:
                        continue
                    try:
                        fd = os.open(here / name, os.O_RDONLY)
                    except OSError:
                        continue
                    try:
                        self.file_synced(here / name, fd)
                    finally:
                        os.close(fd)

    def file_synced(self, path: Path, fd: int, *, append_only: bool = False) -> None:
        """Record the file's content now. `append_only` (a segment's FileRecords):
        it only grew since its last record unless `file_rewritten` said otherwise,
        so only the new bytes are copied."""
        st = os.fstat(fd)
        data = self.directory / "data" / str(st.st_ino)
        size_file = data.with_suffix(".size")
        # a descriptor of our own: its file offset is not the caller's, and it reads
        # a file the caller opened for writing only
        own = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)
        try:
            recorded = self._append_only.get(st.st_ino)
            if append_only and recorded is not None and recorded <= st.st_size:
                with open(data, "ab") as f:
                    f.write(os.pread(own, st.st_size - recorded, recorded))
            else:
                content = _read_data(own, st.st_size)
                _write_atomically(data, content if append_only else content.rstrip(b"\0"))
            _write_atomically(size_file, str(st.st_size).encode())
        finally:
            os.close(own)
        if append_only:
            self._append_only[st.st_ino] = st.st_size
        self._pin(path, st.st_ino)

    def file_rewritten(self, fd: int) -> None:
        """The file was cut or written inside: the next record copies it whole."""
        self._append_only.pop(os.fstat(fd).st_ino, None)

    def dir_synced(self, path: Path) -> None:
        path = path.absolute()
        try:
            names = _listing(path)
        except FileNotFoundError:
            return
        record = {"path": str(path), "entries": names}
        _write_atomically(
            self.directory / "dirs" / f"{_dir_key(path)}.json", json.dumps(record).encode()
        )
        for name, ino in names.items():
            if not (path / name).is_dir():
                self._pin(path / name, ino)

    def _pin(self, path: Path, ino: int) -> None:
        pin = self.directory / "pins" / str(ino)
        if pin.exists():
            return
        try:
            os.link(path, pin)
        except OSError:  # gone meanwhile, another filesystem: only reuse is unguarded
            pass


@dataclass(frozen=True)
class PowerFailure:
    """What a power failure did: files removed, files put back to their last
    fsync, {path: bytes lost} (from the first byte that differs, or the whole file),
    torn writes kept ({path: bytes of the unsynced tail kept})."""

    removed: list[str]
    restored: list[str]
    cut: dict[str, int]
    torn: dict[str, int]


def _durable_content(ledger: Path, ino: int) -> bytes | None:
    data = ledger / "data" / str(ino)
    try:
        content = data.read_bytes()
        size = int(data.with_suffix(".size").read_text())
    except FileNotFoundError:
        return None
    # longer than its size: a SIGKILL between appending and recording the size
    return content[:size] + b"\0" * (size - len(content))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        for child in path.iterdir():
            _remove(child)
        path.rmdir()
    else:
        path.unlink()


def power_failure(
    ledger_dir: str | Path, *, seed: int | None = None, tear_probability: float = 0.5
) -> PowerFailure:
    """Apply a power failure to the (killed) process's files the ledger in
    `ledger_dir` governs: each goes back to its durable state. With `seed`, each
    `.log` file that only grew since its last fsync keeps, with
    `tear_probability`, a random strict prefix of the bytes written since (a torn
    write); without, none does."""
    ledger = Path(ledger_dir).absolute()
    roots = [Path(r) for r in json.loads((ledger / "roots.json").read_text())]
    durable_dirs: dict[Path, dict[str, int]] = {}
    for record_file in (ledger / "dirs").glob("*.json"):
        record = json.loads(record_file.read_text())
        durable_dirs[Path(record["path"])] = record["entries"]
    rng = random.Random(seed) if seed is not None else None
    removed: list[str] = []
    restored: list[str] = []
    torn: dict[str, int] = {}
    cut: dict[str, int] = {}

    def crash_dir(directory: Path) -> None:
        names = durable_dirs.get(directory, {})  # never fsynced: no name in it is durable
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            path = Path(entry.path)
            if entry.name in FILES_NOT_GOVERNED:
                continue
            if entry.name not in names:
                if entry.is_file(follow_symlinks=False):
                    cut[str(path)] = entry.stat().st_size
                _remove(path)
                removed.append(str(path))
                continue
            if entry.is_dir(follow_symlinks=False):
                crash_dir(path)
                continue
            crash_file(path, entry.inode(), names[entry.name])

    def crash_file(path: Path, current_ino: int, durable_ino: int) -> None:
        durable = _durable_content(ledger, durable_ino)
        if durable is None:
            durable = b""
        now = path.read_bytes()
        if now == durable:
            return
        kept = durable
        if (
            rng is not None
            and path.suffix == ".log"
            and current_ino == durable_ino
            and len(now) > len(durable)
            and now.startswith(durable)
            and rng.random() < tear_probability
        ):
            grown = len(now) - len(durable)
            extra = rng.randrange(1, grown) if grown > 1 else 0
            if extra:
                kept = now[: len(durable) + extra]
                torn[str(path)] = extra
        if current_ino != durable_ino:
            # the name points at another inode now (a rename not made durable):
            # put the durable one's content back under it, as a new file
            path.unlink()
        with open(path, "r+b" if path.exists() else "wb") as f:
            f.write(kept)
            f.truncate(len(kept))
        restored.append(str(path))
        if now.startswith(kept):
            same = len(kept)
        else:
            same = next(
                (i for i, (a, b) in enumerate(zip(now, kept, strict=False)) if a != b), len(now)
            )
        if len(now) > same:
            cut[str(path)] = len(now) - same

    for root in roots:
        if root.is_dir():
            crash_dir(root.absolute())
    return PowerFailure(removed=removed, restored=restored, cut=cut, torn=torn)


__all__ = [
    "FILES_NOT_GOVERNED",
    "LAZYFS_ENABLE_CONFIG",
    "DurabilityLedger",
    "PowerFailure",
    "attach",
    "data_dirs",
    "dir_synced",
    "file_rewritten",
    "file_synced",
    "install",
    "install_for",
    "installed",
    "ledger_dir_for",
    "power_failure",
    "uninstall",
]
