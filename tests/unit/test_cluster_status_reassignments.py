"""`kafkalab cluster status` lists the reassignments in progress, read from the
controller's metadata log files (so it answers with every process down)."""

from __future__ import annotations

import argparse

from kafkalab.cluster.cli import _status
from kafkalab.controller.quorum_controller import QuorumController
from kafkalab.server.quorum_meta_log_listener import controller_directory


def test_status_lists_a_reassignment_in_progress_and_not_a_finished_one(tmp_path, capsys):
    # where the controller process keeps it: its committed records under metadata-image/
    c = QuorumController(controller_directory(tmp_path / "controller"))
    for b in (1, 2, 3):
        c.heartbeat(b, c.register_broker(b, "127.0.0.1", 9090 + b, f"i{b}", now_ms=0), now_ms=0)
    c.create_topic("moving", 1, 2, assignments={0: [1, 2]})
    c.create_topic("shrunk", 1, 3, assignments={0: [1, 2, 3]})
    c.alter_partition_reassignments([("moving", 0, [2, 3]), ("shrunk", 0, [1, 2])])
    c.close()
    state = {"controller": {"address": "127.0.0.1:1", "pid": None}, "brokers": {}}
    assert _status(argparse.Namespace(), tmp_path, state) == 0
    out = capsys.readouterr().out
    assert "reassignments in progress" in out
    assert "moving\t0\t[2, 3, 1]\t[3]\t[1]" in out
    assert "shrunk" not in out  # completed at once: its targets were in sync
