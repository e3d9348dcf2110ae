"""What a broker does with a reassignment's records (BrokerMetadataListener): a
leader starts tracking the replicas that join (so their fetches count and they can
enter the ISR), and a broker that is no longer a replica stops its partition and
deletes the log, also a log it finds at startup."""

from __future__ import annotations

import asyncio

from test_metadata_listener import apply, listener, topic, topic_id

from kafkalab.replication.partition import Role
from kafkalab.server.metadata_listener import MetadataDelta


def change(**fields) -> dict:
    """Kafka's PartitionChangeRecord: only what changes; `leader` there bumps the
    leader epoch (the same leader too), every change bumps the partition epoch."""
    return {"type": "PartitionChangeRecord", "topic_id": topic_id("a"), "partition": 0, **fields}


def test_a_leader_tracks_the_adding_replica_then_forgets_the_removed_one(tmp_path):
    lst, rm, _ = listener(tmp_path)
    apply(lst, topic("a", 1, [1]))  # replicas [1, 2, 3], broker 1 leads
    part = rm.partition(("a", 0))
    assert sorted(part.remote) == [2, 3]
    apply(
        lst,
        [
            change(
                isr=[1, 2, 3], replicas=[1, 2, 4, 3], adding_replicas=[4], removing_replicas=[3],
            )
        ],
    )  # fmt: skip
    assert part.role == Role.LEADER and part.leader_epoch == 0
    assert part.replicas == [1, 2, 4, 3] and sorted(part.remote) == [2, 3, 4]
    rm.update_follower_fetch_state(("a", 0), 4, 0)  # broker 4 may fetch now
    apply(
        lst,
        [
            change(
                leader=1, isr=[1, 2, 4],
                replicas=[1, 2, 4], adding_replicas=[], removing_replicas=[],
            )
        ],
    )  # fmt: skip
    assert part.leader_epoch == 1 and sorted(part.remote) == [2, 4]


def test_a_broker_moved_off_a_partition_deletes_its_log(tmp_path):
    lst, rm, _ = listener(tmp_path)
    apply(lst, topic("a", 1, [2]))  # broker 1 follows 2
    assert (tmp_path / "logs" / "a-0").exists()
    apply(
        lst,
        [
            change(
                leader=2, isr=[2, 3],
                replicas=[2, 3], adding_replicas=[], removing_replicas=[],
            )
        ],
    )  # fmt: skip
    assert rm.partition(("a", 0)) is None
    assert not (tmp_path / "logs" / "a-0").exists()
    assert rm.log_manager.get_log("a", 0) is None


def test_a_stray_log_found_at_startup_is_deleted(tmp_path):
    lst, rm, _ = listener(tmp_path)
    rm.log_manager.get_or_create_log("a", 0)  # left from before broker 1 was moved off
    records = topic("a", 1, [2])
    records[1] = {**records[1], "replicas": [2, 3], "isr": [2, 3]}
    apply(lst, records)
    assert rm.partition(("a", 0)) is None and rm.log_manager.get_log("a", 0) is None


def test_a_log_is_kept_while_the_image_is_only_part_of_the_log(tmp_path):
    """Replaying a long history in several fetches, a broker passes through a move
    away and a move back: nothing is deleted until the image is the whole log."""
    lst, rm, _ = listener(tmp_path)
    apply(lst, topic("a", 1, [2]))  # broker 1 follows 2
    away = change(leader=2, isr=[2, 3], replicas=[2, 3])
    back = change(isr=[2, 3, 1], replicas=[2, 3, 1])
    for record, caught_up in ((away, False), (back, True)):
        delta = MetadataDelta()
        delta.replay(record, lst.image)
        lst.image.replay(record)
        asyncio.run(lst._publish(delta, caught_up=caught_up))
    assert rm.partition(("a", 0)) is not None and (tmp_path / "logs" / "a-0").exists()
    delta = MetadataDelta()
    delta.replay(away, lst.image)
    lst.image.replay(away)
    asyncio.run(lst._publish(delta, caught_up=False))
    assert (tmp_path / "logs" / "a-0").exists()  # not yet: more of the log may follow
    asyncio.run(lst._publish(MetadataDelta(), caught_up=True))
    assert rm.partition(("a", 0)) is None and not (tmp_path / "logs" / "a-0").exists()
