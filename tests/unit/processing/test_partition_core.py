"""The two executors of a partition share their core; neither re-states nor overrides it."""

from __future__ import annotations

import inspect

import pytest

from conveyor.processing.executor import PartitionExecutor
from conveyor.processing.partition_core import PartitionCore
from conveyor.processing.virtual import VirtualPartitionExecutor

EXECUTORS = (PartitionExecutor, VirtualPartitionExecutor)


def _shared_members() -> set[str]:
    """What the core implements: every member but the abstract ones."""
    abstract = PartitionCore.__abstractmethods__
    members = set(vars(PartitionCore))
    return {
        name
        for name in members
        if name not in abstract and not name.startswith("__") and name != "_abc_impl"
    }


@pytest.mark.parametrize("executor", EXECUTORS, ids=lambda kind: kind.__name__)
def test_an_executor_implements_the_abstract_members_and_overrides_nothing_shared(
    executor: type[PartitionCore],
) -> None:
    assert executor.__bases__ == (PartitionCore,)
    assert not inspect.isabstract(executor)
    overridden = _shared_members() & set(vars(executor))
    assert overridden == set(), f"{executor.__name__} overrides the core's {sorted(overridden)}"


def test_the_virtual_executor_is_not_a_partition_executor() -> None:
    assert not issubclass(VirtualPartitionExecutor, PartitionExecutor)
