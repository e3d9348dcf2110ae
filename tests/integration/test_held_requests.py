"""kafkalab's held-request fault (kafkalab.server.link_faults) on one broker: the
next client request of a kind waits in its connection while other connections
are served, and goes when released; between brokers nothing is held."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kafkalab.client.network_client import BrokerConnection
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.server.broker import BrokerThread
from kafkalab.server.link_faults import (
    hold_requests,
    read_deaf_to,
    release_requests,
    write_deaf_to,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerThread(
        {
            "log.dirs": str(tmp_path_factory.mktemp("held")),
            "listeners": "PLAINTEXT://127.0.0.1:0,BROKER://127.0.0.1:0",
            "inter.broker.listener.name": "BROKER",
        }
    ).start()
    yield b
    b.stop()


def connect(broker: BrokerThread) -> BrokerConnection:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    return BrokerConnection(host, int(port), timeout_s=60)


def test_a_held_request_waits_while_other_connections_are_served(broker):
    log_dir = Path(broker.config.log_dirs[0])
    write_deaf_to(log_dir, {7})
    hold_requests(log_dir, ApiKeys.METADATA, count=1, ms=60_000)
    assert read_deaf_to(log_dir) == {7}  # the two faults share the file
    held_conn, other = connect(broker), connect(broker)
    answered: list[dict] = []
    body = {"topics": [], "allow_auto_topic_creation": False}
    thread = threading.Thread(
        target=lambda: answered.append(held_conn.request(ApiKeys.METADATA, body)), daemon=True
    )
    try:
        thread.start()
        thread.join(1.0)
        assert thread.is_alive() and not answered, "the first Metadata request is held"
        # the count is spent: the same request on another connection is answered
        assert other.request(ApiKeys.METADATA, body)["brokers"]
        release_requests(log_dir)
        thread.join(30)
        assert answered and answered[0]["brokers"]
        assert read_deaf_to(log_dir) == {7}  # releasing keeps the cut links
    finally:
        held_conn.close()
        other.close()
        write_deaf_to(log_dir, set())
