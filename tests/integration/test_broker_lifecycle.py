"""A broker's heartbeats come from a thread of their own (Kafka's
BrokerLifecycleManager has its own event queue and thread): a broker whose event
loop is busy for several session timeouts is not fenced."""

from __future__ import annotations

import time

from kafkalab.server.broker import BrokerThread
from kafkalab.server.controller_server import ControllerThread
from kafkalab.server.events import read_events

SESSION_MS = 1500


def test_a_busy_event_loop_does_not_stop_the_heartbeats(tmp_path):
    with ControllerThread(
        {
            "log.dirs": str(tmp_path / "controller"),
            "broker.session.timeout.ms": str(SESSION_MS),
            "listeners": "CONTROLLER://127.0.0.1:0",
        }
    ) as controller:
        broker = BrokerThread(
            {
                "node.id": "1",
                "log.dirs": str(tmp_path / "broker-1"),
                "controller.quorum.bootstrap.servers": controller.server.address,
                "broker.heartbeat.interval.ms": "150",
            }
        ).start()
        try:
            lifecycle = broker.broker.lifecycle
            assert lifecycle.unfenced.wait(30), "the broker never got unfenced"
            before = lifecycle.heartbeats
            # The broker's event loop does nothing else for four session timeouts
            # (as when it applies the leaderships of thousands of partitions).
            broker._loop.call_soon_threadsafe(time.sleep, 4 * SESSION_MS / 1000)
            time.sleep(4 * SESSION_MS / 1000 + 0.5)
            assert lifecycle.heartbeats > before + 5  # heartbeats went on meanwhile
            assert controller.call(lambda c: c.brokers[1].fenced) is False
        finally:
            broker.stop()
    fences = [e for e in read_events(tmp_path / "controller") if e["event"] == "fenced"]
    # the only fence is the controlled shutdown's, at the end
    assert len(fences) == 1
