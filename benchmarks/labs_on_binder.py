"""Every lab notebook, run top to bottom as Binder would: time and peak memory.

A mybinder pod has about 2 GB of memory and one CPU for everything. This runs
each notebook in labs/ with a fresh kernel, the way JupyterLab does (nbclient),
with the environment `binder/start` sets (the ci scale, 1 GB for Spark's
driver, a 3 s floor under session timeouts), pinned to one CPU (the kernel,
the brokers, the controller, Spark's JVM and its Python workers all inherit
the affinity). Four times a second it adds up the memory of the kernel's whole
process tree: PSS (each shared page split between the processes that map it,
so the sum is what the tree really holds) and, for comparison, RSS. It
reports each notebook's wall time and peak, the peak of all, and any process a
notebook left running.

    make binder-fit                     # all notebooks, Binder's environment, one CPU
    .venv/bin/python benchmarks/labs_on_binder.py --only 03_replication
    .venv/bin/python benchmarks/labs_on_binder.py --only 05_transactions/05 --only 09_kraft
    .venv/bin/python benchmarks/labs_on_binder.py --no-binder --cpus 2 --scale full

Writes benchmarks/results/labs-<scale>-<cpus>cpu-<commit>[-<only>[+<only>...]].json
(committed: the README's figures come from these files).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
LIMIT_BYTES = 2 * 1024 * MIB  # what a mybinder pod has, about


def binder_environment() -> dict[str, str]:
    """The variables binder/start exports, read by running it (so this measures
    the file Binder runs, not a copy of its settings)."""
    shown = subprocess.run(
        [str(ROOT / "binder" / "start"), "env", "-0"],
        capture_output=True,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("KAFKALAB_")},
    ).stdout
    pairs = (item.split("=", 1) for item in shown.decode().split("\0") if "=" in item)
    return {k: v for k, v in pairs if k.startswith("KAFKALAB_")}


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name (field 2) may hold spaces: the ppid follows its ')'.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def descendants(pid: int) -> list[int]:
    tree, found, todo = _children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def memory(pid: int) -> tuple[int, int]:
    """(PSS, RSS) of one process in bytes; (0, 0) once it is gone."""
    pss = rss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
            elif line.startswith("Rss:"):
                rss = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return pss, rss


def command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:160]
    except OSError:
        return "?"


# Set for each notebook's kernel to a value of its own; every process the kernel
# starts (brokers, controllers, Spark's JVM and workers) inherits it, so one that
# outlives the kernel is told from the processes of other jobs on the machine.
RUN_MARKER = "LABS_ON_BINDER_RUN"


def started_under(pid: int, token: str) -> bool:
    """Whether the process carries RUN_MARKER=token in its environment."""
    try:
        environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"{RUN_MARKER}={token}".encode() in environment


@dataclass
class Peak:
    pss: int = 0
    rss: int = 0
    processes: int = 0
    biggest: list[tuple[str, int]] = field(default_factory=list)


class TreeSampler(threading.Thread):
    """Samples the memory of every process under this one until stopped."""

    def __init__(self, interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.peak = Peak()
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            pids = descendants(os.getpid())
            sizes = {pid: memory(pid) for pid in pids}
            pss = sum(p for p, _ in sizes.values())
            if pss > self.peak.pss:
                top = sorted(sizes.items(), key=lambda kv: -kv[1][0])[:5]
                self.peak = Peak(
                    pss=pss,
                    rss=sum(r for _, r in sizes.values()),
                    processes=len(pids),
                    biggest=[(command(pid), size[0] // MIB) for pid, size in top],
                )

    def stop(self) -> Peak:
        self._stop_event.set()
        self.join()
        return self.peak


@dataclass
class NotebookRun:
    notebook: str
    seconds: float
    peak_pss_mib: float
    peak_rss_mib: float
    processes_at_peak: int
    biggest_at_peak: list[tuple[str, int]]
    error: str | None
    left_running: list[str]


def run_notebook(path: Path, cell_timeout: int) -> NotebookRun:
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=cell_timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    before = {pid for pids in _children().values() for pid in pids}
    token = f"{os.getpid()}-{time.monotonic_ns()}"
    os.environ[RUN_MARKER] = token  # the kernel starts with a copy of this environment
    sampler = TreeSampler()
    sampler.start()
    started = time.monotonic()
    error = None
    try:
        client.execute()
    except CellExecutionError as exc:
        # nbclient's message: the failing cell's source between dashed lines, then the error
        lines = str(exc).strip().splitlines()
        cell = lines[2] if len(lines) > 2 else "?"
        error = f"in the cell starting {cell[:120]!r}: {lines[-1][:300]}"
    except Exception as exc:  # a kernel that died, a timeout: reported, the run goes on
        error = f"{type(exc).__name__}: {exc}"[:300]
    seconds = time.monotonic() - started
    peak = sampler.stop()
    time.sleep(2)  # a process on its way out is not left behind
    # Left running: what is still under us, and what the notebook started that
    # outlived its kernel (an orphan belongs to init, no longer to us: it is told
    # by the token in its environment, not by its name, which other jobs share).
    new = {pid for pids in _children().values() for pid in pids} - before
    under_us = set(descendants(os.getpid()))
    left = sorted({command(pid) for pid in new if pid in under_us or started_under(pid, token)})
    del os.environ[RUN_MARKER]
    return NotebookRun(
        notebook=str(path.relative_to(ROOT)),
        seconds=round(seconds, 1),
        peak_pss_mib=round(peak.pss / MIB, 1),
        peak_rss_mib=round(peak.rss / MIB, 1),
        processes_at_peak=peak.processes,
        biggest_at_peak=peak.biggest,
        error=error,
        left_running=left,
    )


def selected(paths: list[Path], only: list[str]) -> list[Path]:
    """The notebooks whose path contains any of the --only patterns (all without one)."""
    return [path for path in paths if not only or any(pattern in str(path) for pattern in only)]


def results_name(scale: str, cpus: int, commit: str, only: list[str]) -> str:
    """The results file's name: the patterns, if any, joined by '+' after the commit."""
    patterns = "+".join(pattern.replace("/", "-").strip("-") for pattern in only)
    return f"labs-{scale}-{cpus}cpu-{commit}{'-' + patterns if patterns else ''}.json"


def commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--no-binder",
        dest="binder",
        action="store_false",
        help="keep this environment instead of binder/start's",
    )
    parser.add_argument("--cpus", type=int, default=1, help="CPUs to run on (default 1)")
    parser.add_argument("--scale", help="KAFKALAB_SCALE (default: binder/start's, else full)")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="run notebooks whose path contains this (repeat it: any of them)",
    )
    parser.add_argument("--cell-timeout", type=int, default=1800)
    args = parser.parse_args()

    if args.binder:
        os.environ.update(binder_environment())
    if args.scale:
        os.environ["KAFKALAB_SCALE"] = args.scale
    scale = os.environ.setdefault("KAFKALAB_SCALE", "full")
    cpus = set(sorted(os.sched_getaffinity(0))[: args.cpus])
    os.sched_setaffinity(0, cpus)  # every process started from here on inherits it
    settings = {k: v for k, v in os.environ.items() if k.startswith("KAFKALAB_")}
    print(f"labs at scale {scale} on CPU {sorted(cpus)} with {settings}", flush=True)

    runs = []
    for path in selected(sorted((ROOT / "labs").glob("*/*.ipynb")), args.only):
        print(f"== {path.relative_to(ROOT)} ...", end=" ", flush=True)
        run = run_notebook(path, args.cell_timeout)
        runs.append(run)
        verdict = "ok" if run.error is None else f"FAILED: {run.error}"
        print(
            f"{run.seconds:.0f} s, peak {run.peak_pss_mib:.0f} MiB PSS "
            f"({run.peak_rss_mib:.0f} MiB RSS), {verdict}",
            flush=True,
        )
        for left in run.left_running:
            print(f"   left running: {left}", flush=True)

    if not runs:
        print(f"no notebook under labs/ matches any of {args.only!r}")
        return 2
    worst = max(runs, key=lambda r: r.peak_pss_mib)
    result = {
        "commit": commit(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": time.strftime("%Y-%m-%d"),
        "scale": scale,
        "cpus": sorted(cpus),
        "environment": settings,
        "notebooks": [asdict(r) for r in runs],
        "total_seconds": round(sum(r.seconds for r in runs), 1),
        "peak_pss_mib": worst.peak_pss_mib,
        "peak_notebook": worst.notebook,
        "limit_mib": LIMIT_BYTES // MIB,
        "failed": [r.notebook for r in runs if r.error],
        "left_running": sorted({p for r in runs for p in r.left_running}),
    }
    out = ROOT / "benchmarks" / "results"
    out.mkdir(exist_ok=True)
    name = results_name(scale, len(cpus), result["commit"], args.only)
    (out / name).write_text(json.dumps(result, indent=2) + "\n")
    fits = worst.peak_pss_mib * MIB < LIMIT_BYTES
    print(
        f"\n{len(runs)} notebooks in {result['total_seconds']:.0f} s; peak "
        f"{worst.peak_pss_mib:.0f} MiB ({worst.notebook}), "
        f"{'under' if fits else 'OVER'} {LIMIT_BYTES // MIB} MiB; "
        f"{len(result['failed'])} failed; wrote benchmarks/results/{name}"
    )
    return 0 if fits and not result["failed"] and not result["left_running"] else 1


if __name__ == "__main__":
    sys.exit(main())
