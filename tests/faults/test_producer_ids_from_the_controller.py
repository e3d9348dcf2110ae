"""Producer ids come from the controller (AllocateProducerIds, KIP-730), in blocks it
records in the metadata log (ProducerIdsRecord) before it hands them out. So no id
is given twice: not by two brokers, not by a broker whose data directory was wiped
(it remembers nothing), not after the controller restarted (it replays its log)."""

from __future__ import annotations

import shutil
import socket
import struct
import time

import pytest

from kafkalab.cluster import LocalCluster
from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.header import RequestHeader, decode_response, encode_request
from kafkalab.protocol.messages import APIS

pytestmark = pytest.mark.integration


def init_producer_ids(address: str, n: int, timeout_s: float = 30) -> list[int]:
    """n idempotent producers' InitProducerId (v1, no transactional id) on one
    connection; COORDINATOR_LOAD_IN_PROGRESS (no block yet) is retried, as clients do."""
    host, port = address.rsplit(":", 1)
    out: list[int] = []
    deadline = time.monotonic() + timeout_s
    with socket.create_connection((host, int(port)), timeout=30) as s:
        f = s.makefile("rb")
        while len(out) < n:
            body = {"transactional_id": None, "transaction_timeout_ms": 60_000}
            header = RequestHeader(ApiKeys.INIT_PRODUCER_ID, 1, len(out), "ids")
            s.sendall(encode_request(header, body, APIS))
            (size,) = struct.unpack(">i", f.read(4))
            _, r = decode_response(APIS[ApiKeys.INIT_PRODUCER_ID], 1, f.read(size))
            if r["error_code"] == Errors.COORDINATOR_LOAD_IN_PROGRESS:
                assert time.monotonic() < deadline, "no producer id block from the controller"
                time.sleep(0.05)
                continue
            assert r["error_code"] == 0, Errors(r["error_code"])
            out.append(r["producer_id"])
    return out


def test_ids_are_unique_across_brokers_wiped_disks_and_controller_restarts(tmp_path):
    with LocalCluster(brokers=2, base_dir=tmp_path) as cluster:
        given: list[int] = []
        for b in (1, 2):
            given += init_producer_ids(cluster.brokers[b].bootstrap_servers, 20)
        for _ in range(3):
            # The controller restarts, on its address (brokers know only that one)...
            controller = cluster.controller
            address = controller.bootstrap_servers
            controller.stop()
            controller.props["listeners"] = f"CONTROLLER://{address}"
            controller.start()
            # ...and broker 1 loses its disk: it comes back knowing nothing.
            cluster.brokers[1].stop()
            shutil.rmtree(cluster.broker_dir(1))
            cluster.start_broker(1)
            for b in (1, 2):
                given += init_producer_ids(cluster.brokers[b].bootstrap_servers, 20)
        assert len(given) == len(set(given)) == 8 * 20, "a producer id was handed out twice"
        # The wiped broker got a fresh block each time, after every block before it.
        fresh = init_producer_ids(cluster.brokers[1].bootstrap_servers, 1)[0]
        assert fresh > max(given[:40])
