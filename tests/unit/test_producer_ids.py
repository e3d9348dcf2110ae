"""Producer ids are never handed out twice: not after a restart, not by two brokers
of one cluster, not by a broker whose data directory was wiped, not after the
controller restarted (two idempotent producers with one id would fence or reorder
each other's sequences). In a cluster the blocks come from the controller
(AllocateProducerIds), which records each one in its metadata log."""

import asyncio

import pytest

from kafkalab.controller.quorum_controller import QuorumController
from kafkalab.errors import Errors, KafkaError
from kafkalab.server.producer_ids import BLOCK_SIZE, ProducerIdManager, RPCProducerIdManager


def test_ids_survive_a_restart_without_repeating(tmp_path):
    first = ProducerIdManager(tmp_path)
    given = [first.generate() for _ in range(5)]
    again = ProducerIdManager(tmp_path)  # a crash: the rest of the block is skipped
    assert again.generate() == BLOCK_SIZE
    assert given == list(range(5))


async def _generate(manager: RPCProducerIdManager, n: int) -> list[int]:
    """n ids, waiting (as a client retrying COORDINATOR_LOAD_IN_PROGRESS does) while
    the next block is on its way."""
    out: list[int] = []
    while len(out) < n:
        try:
            out.append(manager.generate())
        except KafkaError as e:
            assert e.code == Errors.COORDINATOR_LOAD_IN_PROGRESS
            await asyncio.sleep(0.01)
    return out


def test_brokers_restarts_and_wiped_disks_never_share_an_id(tmp_path):
    """Brokers 1 and 2 take ids from the controller in turns; between rounds the
    controller restarts (it replays its log) and broker 1 comes back as from a wiped
    disk (a new manager: it remembers nothing). Every id is handed out once."""

    async def run() -> list[int]:
        controller = QuorumController(tmp_path / "controller")
        epochs = {b: controller.register_broker(b, "h", b, f"i{b}", now_ms=0) for b in (1, 2)}
        asked = []

        async def allocate(broker_id: int, broker_epoch: int) -> tuple[int, int]:
            asked.append(broker_id)
            await asyncio.sleep(0)  # the answer comes later, as over the network
            return controller.allocate_producer_ids(broker_id, broker_epoch)

        managers = {b: RPCProducerIdManager(b, lambda b=b: epochs[b], allocate) for b in (1, 2)}
        ids = []
        for _ in range(4):
            for m in managers.values():
                m.start()
            for b in (1, 2):
                ids += await _generate(managers[b], BLOCK_SIZE + 7)
            controller.close()
            controller = QuorumController(tmp_path / "controller")
            managers[1].stop()
            managers[1] = RPCProducerIdManager(1, lambda: epochs[1], allocate)
        for m in managers.values():
            m.stop()
        controller.close()
        assert set(asked) == {1, 2}
        return ids

    ids = asyncio.run(run())
    assert len(ids) == len(set(ids)) == 8 * (BLOCK_SIZE + 7)


def test_no_block_yet_is_a_retriable_error_and_the_next_block_is_asked_early(tmp_path):
    async def run():
        controller = QuorumController(tmp_path)
        epoch = controller.register_broker(1, "h", 1, "i1", now_ms=0)
        calls = []

        async def allocate(broker_id, broker_epoch):
            calls.append(broker_epoch)
            return controller.allocate_producer_ids(broker_id, broker_epoch)

        registered = {"epoch": -1}
        manager = RPCProducerIdManager(1, lambda: registered["epoch"], allocate)
        with pytest.raises(KafkaError) as no_block:
            manager.generate()  # not registered yet: nothing to hand out
        assert no_block.value.code == Errors.COORDINATOR_LOAD_IN_PROGRESS
        await asyncio.sleep(0.05)
        assert calls == [], "no AllocateProducerIds before the broker has an epoch"
        registered["epoch"] = epoch
        first = await _generate(manager, 1)
        assert first == [0] and calls == [epoch]
        await _generate(manager, int(0.9 * BLOCK_SIZE))  # 90% used: the next block is asked
        await asyncio.sleep(0.05)
        assert len(calls) == 2
        rest = await _generate(manager, BLOCK_SIZE)
        given = 1 + int(0.9 * BLOCK_SIZE) + BLOCK_SIZE
        assert rest[-1] == given - 1, "the second block follows the first, without a gap"
        manager.stop()
        controller.close()

    asyncio.run(run())
