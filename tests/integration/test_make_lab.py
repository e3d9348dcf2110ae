"""The README's first command, run as a user runs it: the real `make lab`.

`make lab` is the front door of the project. This test runs it in a subprocess
(its own process group, as a terminal would), reads the URL with its token that
JupyterLab prints, asks the Jupyter server API for the lab tree and opens every
notebook through it, then stops it with SIGTERM to the whole group and checks
that it stopped cleanly and that nothing it started is left running.

Why SIGTERM: it is what `docker stop`, CI runners and process managers send,
and JupyterLab answers it as it answers Ctrl-C twice at a terminal (a clean
stop: kernels shut down, server files removed). Without a terminal, a single
SIGINT only raises KeyboardInterrupt in the server and skips that cleanup.

It runs as whoever runs the suite: as root (containers, CI runners) it is the test
that catches a lab that refuses to start as root.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LABS = ROOT / "labs"

# How long `make lab` may take to print its URL when the venv is already set up
# (inside `make test` it is); a bound for a hang, not a performance check.
START_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 60.0

# JupyterLab prints e.g. "    http://127.0.0.1:8888/lab?token=3f2c...".
URL_RE = re.compile(r"(http://127\.0\.0\.1:\d+)/lab\?token=([^\s&]+)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _proc_stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgrp, starttime) of a process from /proc, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2]), int(fields[19])


def _all_processes() -> dict[int, tuple[str, int, int, int]]:
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _proc_stat(int(entry.name))
            if stat is not None:
                table[int(entry.name)] = stat
    return table


def _started_by(root_pid: int) -> dict[int, int]:
    """Every live process in root_pid's group or below it: pid -> starttime.

    Below it catches what left the group (a kernel in its own session);
    in the group catches what was reparented after its parent exited.
    """
    table = _all_processes()
    found = {pid for pid, (_, _, pgrp, _) in table.items() if pgrp == root_pid}
    found.add(root_pid)
    grew = True
    while grew:
        grew = False
        for pid, (_, ppid, _, _) in table.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    return {pid: table[pid][3] for pid in found if pid in table and table[pid][0] != "Z"}


def _still_running(known: dict[int, int], group: int) -> list[str]:
    """Processes of `known` (same pid and start time) or of `group` not yet gone."""
    alive = []
    for pid, (state, _, pgrp, start) in _all_processes().items():
        if state == "Z":
            continue  # exited; only waiting for its parent to reap it
        if pgrp == group or known.get(pid) == start:
            try:
                args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                args = b"?"
            alive.append(f"{pid}: {args.decode(errors='replace').strip()}")
    return alive


def _stop(proc: subprocess.Popen, known: dict[int, int]) -> list[str]:
    """SIGTERM the whole group; SIGKILL whatever outlives the timeout.

    Returns what was still running after the timeout (and had to be killed).
    """
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + STOP_TIMEOUT_S
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass
    leftovers = _still_running(known, proc.pid)
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.2)
        leftovers = _still_running(known, proc.pid)
    if leftovers:
        for line in leftovers:
            try:
                os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
    return leftovers


def _get_json(base: str, token: str, path: str, **query: str) -> dict:
    url = f"{base}{path}"
    if query:
        url += "?" + urllib.parse.urlencode(query)
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200, f"GET {url}: HTTP {response.status}"
        return json.loads(response.read())


def _wait_for_api(base: str, token: str, output: list[str]) -> dict:
    deadline = time.monotonic() + 60
    while True:
        try:
            return _get_json(base, token, "/api/status")
        except (urllib.error.URLError, ConnectionError) as e:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the server at {base} never answered: {e}\n{''.join(output)}"
                ) from e
            time.sleep(0.2)


@pytest.mark.skipif(shutil.which("make") is None, reason="`make` is not installed")
def test_make_lab_serves_the_labs(tmp_path: Path) -> None:
    env = dict(os.environ)
    # A user types `make lab` in a fresh shell: no make state inherited from a
    # `make test` that runs this test (flags, jobserver, overrides).
    for name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"):
        env.pop(name, None)
    # Jupyter's server files go to a directory of this test, and a personal
    # ~/.jupyter config (a password, say) cannot change what is tested.
    env["JUPYTER_RUNTIME_DIR"] = str(tmp_path / "runtime")
    env["JUPYTER_CONFIG_DIR"] = str(tmp_path / "config")
    port = _free_port()  # not 8888: a user's own lab may be running there
    # The venv is the one running this test (inside `make test`, .venv, just set
    # up). `-o <stamp>` keeps `make lab` from reinstalling packages under the
    # running test when pyproject.toml is newer than the stamp (a test run outside
    # `make test`); everything else is the real `make lab`.
    stamp = re.search(r"^STAMP\s*:=\s*\$\(VENV\)/(\S+)", (ROOT / "Makefile").read_text(), re.M)
    assert stamp, "Makefile: no STAMP := $(VENV)/... line"
    command = [
        "make",
        "-C",
        str(ROOT),
        "-o",
        f"{sys.prefix}/{stamp.group(1)}",
        "lab",
        f"VENV={sys.prefix}",
        f"LAB_PORT={port}",
    ]

    proc = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,  # its own process group, as a terminal gives a job
    )
    output: list[str] = []
    found: dict[str, str] = {}
    url_seen = threading.Event()

    def read_output() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line)
            match = URL_RE.search(line)
            if match and not url_seen.is_set():
                found["base"], found["token"] = match.group(1), match.group(2)
                url_seen.set()
        url_seen.set()  # the output ended: stop waiting

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    started: dict[int, int] = {}
    try:
        url_seen.wait(START_TIMEOUT_S)
        assert found, (
            f"`{' '.join(command)}` printed no http://127.0.0.1:<port>/lab?token=... URL "
            f"(exit code {proc.poll()}):\n{''.join(output)}"
        )
        base, token = found["base"], found["token"]
        _wait_for_api(base, token, output)
        started = _started_by(proc.pid)

        # The lab tree: every folder of labs/ is there.
        tree = _get_json(base, token, "/api/contents", content="1")
        assert tree["type"] == "directory"
        listed = {item["name"] for item in tree["content"] if item["type"] == "directory"}
        on_disk = {p.name for p in LABS.iterdir() if p.is_dir() and not p.name.startswith(".")}
        assert on_disk, "labs/ has no lab folders"
        assert listed == on_disk

        # Every notebook opens through the server as the notebook on disk.
        notebooks = sorted(p for p in LABS.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
        assert notebooks, "labs/ has no notebooks"
        for path in notebooks:
            relative = path.relative_to(LABS).as_posix()
            model = _get_json(
                base,
                token,
                "/api/contents/" + urllib.parse.quote(relative),
                type="notebook",
                content="1",
            )
            assert model["type"] == "notebook" and model["format"] == "json", relative
            disk = json.loads(path.read_text())
            cells = model["content"]["cells"]
            assert cells, f"{relative} has no cells"
            assert len(cells) == len(disk["cells"]), relative
            assert cells[0]["source"] == "".join(disk["cells"][0]["source"]), relative
            assert model["content"]["nbformat"] == 4, relative

        # ... and can run: the server has a Python kernel to run them with.
        specs = _get_json(base, token, "/api/kernelspecs")
        assert specs["default"] in specs["kernelspecs"]
        assert specs["kernelspecs"][specs["default"]]["spec"]["language"] == "python"
    finally:
        leftovers = _stop(proc, started)
        reader.join(timeout=10)

    assert not leftovers, "still running after SIGTERM:\n" + "\n".join(leftovers)
    # A clean stop: Jupyter removed the server file it wrote for `jupyter server list`.
    assert not list((tmp_path / "runtime").glob("jpserver-*.json")), "".join(output)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), timeout=5).close()
