"""The TransactionCoordinatorService on a real ReplicaManager and log: built complete,
it takes over a __transaction_state partition this broker led before it existed,
answers through typed methods once the records are in the log, and a second
service built over the same log (a restart) loads the same state."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kafkalab.coordinator.transaction import (
    TRANSACTION_STATE_TOPIC,
    AddPartitionsToTxnResult,
    InitProducerIdResult,
    TransactionConfig,
    TxnResult,
    TxnState,
)
from kafkalab.coordinator.transaction import transaction_log as tlog
from kafkalab.errors import Errors
from kafkalab.replication.replica_manager import ReplicaManager
from kafkalab.server.coordinator_runtime import StateTopic
from kafkalab.server.metadata_cache import StandaloneMetadataCache
from kafkalab.server.transaction_coordinator_service import TransactionCoordinatorService
from kafkalab.storage import LogConfig, LogManager

CONFIG = TransactionConfig(transaction_state_log_num_partitions=1)
TP = (TRANSACTION_STATE_TOPIC, 0)


def broker_parts(tmp_path):
    loop = asyncio.get_running_loop()
    logs = LogManager(tmp_path, LogConfig(min_insync_replicas=1))
    rm = ReplicaManager(logs, loop.call_later, broker_id=1)
    logs.get_or_create_log(*TP)
    logs.get_or_create_log("t", 0)
    # a standalone broker leads every log it has, before the coordinators exist
    metadata = StandaloneMetadataCache(SimpleNamespace(node_id=1), rm, lambda: ("127.0.0.1", 1))
    return logs, rm, metadata


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_transaction_through_the_service_and_a_restart(tmp_path):
    async def scenario():
        logs, rm, metadata = broker_parts(tmp_path)
        service = TransactionCoordinatorService(CONFIG, rm, metadata, lambda: 42)
        assert service.runtime.state_topic == StateTopic(
            TRANSACTION_STATE_TOPIC, 1, 3, 2, CONFIG.transaction_state_log_segment_bytes, 30_000
        )
        await settle()  # the partition led before the service existed is loaded
        init = await service.init_producer_id("tx", 60_000)
        assert init == InitProducerIdResult(Errors.NONE, 42, 0)
        add = await service.add_partitions_to_txn("tx", 42, 0, [("t", 0)])
        assert add == AddPartitionsToTxnResult({("t", 0): Errors.NONE})
        assert await service.end_txn("tx", 42, 1, True) == TxnResult(Errors.PRODUCER_FENCED)
        (d,) = service.describe_transactions(["tx"])
        assert (d.state, d.partitions) == (TxnState.ONGOING, {("t", 0)})
        records = [tlog.describe_record(r.key, r.value) for r in read_all(logs)]
        assert [line.split("state=")[1].split(",")[0] for line in records] == ["Empty", "Ongoing"]
        service.shutdown()

        again = TransactionCoordinatorService(CONFIG, rm, metadata, lambda: 99)
        await settle()
        (d,) = again.describe_transactions(["tx"])
        assert (d.state, d.producer_id, d.partitions) == (TxnState.ONGOING, 42, {("t", 0)})
        listed = again.list_transactions(["Ongoing"], [])
        assert [t.transactional_id for t in listed.transactions] == ["tx"]
        again.shutdown()
        logs.close()

    asyncio.run(scenario())


def read_all(logs):
    from kafkalab.records import iter_batches

    log = logs.get_log(*TP)
    data = log.read(0, 1 << 20).read_bytes()
    return [r for batch in iter_batches(data) for r in batch.records]


def test_run_refuses_an_answer_of_the_wrong_type(tmp_path):
    async def scenario():
        logs, rm, metadata = broker_parts(tmp_path)
        service = TransactionCoordinatorService(CONFIG, rm, metadata, lambda: 7)
        await settle()
        c = service.coordinator
        with pytest.raises(TypeError, match="expected a TxnResult"):
            await service.runtime.run(
                lambda now, request: c.init_producer_id("tx", 1000, now_ms=now, request=request),
                TxnResult,
            )
        service.shutdown()
        logs.close()

    asyncio.run(scenario())
