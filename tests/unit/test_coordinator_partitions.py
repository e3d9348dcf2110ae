"""CoordinatorPartitions: the partition ownership both coordinators share."""

from hypothesis import given
from hypothesis import strategies as st

from kafkalab.coordinator.coordinator_partitions import CoordinatorPartitions
from kafkalab.errors import Errors


def test_a_partition_is_served_only_once_loaded_and_until_resigned():
    ps = CoordinatorPartitions([])
    assert ps.status(3) is Errors.NOT_COORDINATOR
    assert ps.begin_load(3, epoch=1)
    assert ps.status(3) is Errors.COORDINATOR_LOAD_IN_PROGRESS
    ps.finish_load(3)
    assert ps.status(3) is None
    assert ps.resign(3, epoch=2)
    assert ps.status(3) is Errors.NOT_COORDINATOR


def test_a_stale_epoch_changes_nothing():
    ps = CoordinatorPartitions([])
    ps.begin_load(0, epoch=5)
    ps.finish_load(0)
    assert not ps.resign(0, epoch=4)  # an older resignation arriving late
    assert not ps.begin_load(0, epoch=3)
    assert ps.status(0) is None and ps.epochs[0] == 5


def test_after_close_nothing_is_served():
    ps = CoordinatorPartitions(range(3))
    ps.close()
    assert [ps.status(p) for p in range(3)] == [Errors.COORDINATOR_NOT_AVAILABLE] * 3


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["begin", "finish", "resign"]), st.integers(0, 2), st.integers(0, 4)
        )
    )
)
def test_loading_and_owned_never_overlap_and_epochs_never_go_back(steps):
    ps = CoordinatorPartitions([0])
    for op, p, epoch in steps:
        before = ps.epochs.get(p, -1)
        if op == "begin":
            assert ps.begin_load(p, epoch) == (epoch >= before)
        elif op == "finish":
            ps.finish_load(p)
        else:
            assert ps.resign(p, epoch) == (epoch >= before)
        assert not ps.loading & ps.owned
        assert ps.epochs.get(p, -1) >= before
