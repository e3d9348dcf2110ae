"""The group API handlers' answers when the coordinator refuses, as Kafka gives them.

OffsetFetch v0 and v1 have no top-level error code: Kafka puts the error
(NOT_COORDINATOR while the coordinator moves, COORDINATOR_LOAD_IN_PROGRESS while
the new one loads) on every partition asked for (OffsetFetchRequest.getErrorResponse).
A response with no partitions and no error would tell the client that nothing is
committed, and it would start from auto.offset.reset: records read again, or
skipped, in the very failover the committed offsets are there for."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafkalab.coordinator.group import GroupConfig, GroupCoordinator
from kafkalab.errors import Errors
from kafkalab.protocol.api_keys import ApiKeys
from kafkalab.protocol.header import RequestHeader
from kafkalab.server.apis.group import handle_offset_fetch

PARTITIONS = 6


def apis_with(coordinator: GroupCoordinator):
    """KafkaApis with a GroupCoordinatorService whose OffsetFetch is `coordinator`'s
    (the service's fetch_offsets only hands the call on)."""
    return SimpleNamespace(
        group_coordinator=SimpleNamespace(fetch_offsets=coordinator.fetch_offsets)
    )


def not_coordinator() -> GroupCoordinator:
    return GroupCoordinator(GroupConfig(offsets_topic_num_partitions=PARTITIONS), partitions=())


def loading() -> GroupCoordinator:
    c = not_coordinator()
    c.on_become_leader(c.partition_for("g"), 1)  # elected, its load not complete yet
    return c


def fetch(coordinator: GroupCoordinator, version: int) -> dict:
    header = RequestHeader(ApiKeys.OFFSET_FETCH, version, 1, "test")
    body = {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}]}
    return handle_offset_fetch(apis_with(coordinator), header, body)


@pytest.mark.parametrize(
    ("make", "error"),
    [(not_coordinator, Errors.NOT_COORDINATOR), (loading, Errors.COORDINATOR_LOAD_IN_PROGRESS)],
)
@pytest.mark.parametrize("version", [0, 1])
def test_offset_fetch_v0_v1_put_the_error_on_every_partition_asked_for(make, error, version):
    response = fetch(make(), version)
    assert response["topics"] == [
        {
            "name": "t",
            "partitions": [
                {
                    "partition_index": p,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": int(error),
                }
                for p in (0, 1)
            ],
        }
    ]


@pytest.mark.parametrize(
    ("make", "error"),
    [(not_coordinator, Errors.NOT_COORDINATOR), (loading, Errors.COORDINATOR_LOAD_IN_PROGRESS)],
)
@pytest.mark.parametrize("version", [2, 5])
def test_offset_fetch_v2_on_answers_the_error_at_the_top(make, error, version):
    response = fetch(make(), version)
    assert response["error_code"] == int(error)
    assert response["topics"] == []
