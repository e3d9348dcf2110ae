"""acks=all on a leader with followers: the produce waits in the purgatory until the
ISR has the records, times out, or learns the ISR shrank below min.insync.replicas."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from kafkalab.errors import Errors
from kafkalab.protocol.header import RequestHeader
from kafkalab.records import build_batch
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.kafka_apis import KafkaApis
from kafkalab.server.producer_ids import ProducerIdManager
from kafkalab.storage import LogConfig, LogManager

TP = ("t", 0)


def produce_body(timeout_ms=10_000):
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": timeout_ms,
        "topics": [
            {
                "name": "t",
                "partitions": [{"partition_index": 0, "records": build_batch([b"a", b"b"])}],
            }
        ],
    }


def setup(tmp_path, min_isr=1):
    loop = asyncio.get_running_loop()
    logs = LogManager(tmp_path, LogConfig(min_insync_replicas=min_isr))
    rm = ReplicaManager(logs, loop.call_later, broker_id=1)
    rm.make_leader(TP, leader_epoch=3, isr=[1, 2], replicas=[1, 2], partition_epoch=0)
    config = SimpleNamespace(node_id=1)
    apis = KafkaApis(config, rm, metadata_cache=None, producer_ids=ProducerIdManager(tmp_path))
    return rm, apis


def error_of(response):
    return response["responses"][0]["partitions"][0]["error_code"]


def test_acks_all_waits_for_the_follower(tmp_path):
    async def scenario():
        rm, apis = setup(tmp_path)
        pending = apis.handle(RequestHeader(0, 7, 1, "t"), produce_body())
        assert isinstance(pending, asyncio.Future) and not pending.done()
        assert rm.delayed_produce.watched() == 1
        rm.update_follower_fetch_state(TP, 2, 1)  # the follower has offset 0 only
        await asyncio.sleep(0)
        assert not pending.done()
        rm.update_follower_fetch_state(TP, 2, 2)  # now both records: HW 2
        response = await asyncio.wait_for(pending, 5)
        assert error_of(response) == Errors.NONE
        assert response["responses"][0]["partitions"][0]["base_offset"] == 0
        assert rm.partitions[TP].log.high_watermark == 2
        rm.shutdown()

    asyncio.run(scenario())


def test_acks_all_times_out(tmp_path):
    async def scenario():
        rm, apis = setup(tmp_path)
        pending = apis.handle(RequestHeader(0, 7, 1, "t"), produce_body(timeout_ms=50))
        response = await asyncio.wait_for(pending, 5)
        assert error_of(response) == Errors.REQUEST_TIMED_OUT
        rm.shutdown()

    asyncio.run(scenario())


def test_isr_shrinking_below_min_insync_while_waiting(tmp_path):
    async def scenario():
        rm, apis = setup(tmp_path, min_isr=2)
        pending = apis.handle(RequestHeader(0, 7, 1, "t"), produce_body())
        rm.apply_isr_change(TP, [1], partition_epoch=1)  # the follower was dropped
        response = await asyncio.wait_for(pending, 5)
        assert error_of(response) == Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        rm.shutdown()

    asyncio.run(scenario())
