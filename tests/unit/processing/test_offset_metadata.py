"""Offset metadata without a broker: the rule of which metadata a commit carries (sticky, never
ahead of its offset), the listener's commits of it, marks with metadata on one consumer, in
lanes and in transactions, and a consumer's seek to a time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from conveyor import ConfigurationError, Consumer
from conveyor.driver.consumers import Partition
from conveyor.processing.commits import Commits
from conveyor.processing.offset_metadata import OffsetMetadata
from conveyor.processing.virtual import VirtualPartitionExecutor
from unit.processing.fakes import FakeRaw, raws, rig


class TestTheRule:
    def test_a_commit_carries_the_metadata_of_the_highest_mark_at_or_below_it(self) -> None:
        metadata = OffsetMetadata()
        metadata.mark(5, "five")
        metadata.mark(9, "nine")
        assert metadata.latest == "nine", "the consumer sees its latest mark's at once"
        assert metadata.at(4) is None, "nothing marked at or below 4 gave metadata"
        assert metadata.at(7) == "five", "never metadata given for progress not committed"
        assert metadata.at(9) == "nine"

    def test_metadata_sticks_until_a_mark_gives_other(self) -> None:
        metadata = OffsetMetadata()
        metadata.mark(3, "cursor")
        assert metadata.at(3) == "cursor"
        assert metadata.at(10) == "cursor", "marks without metadata commit it again"
        metadata.mark(11, "")
        assert metadata.at(11) == "", "an empty string clears it"

    def test_what_the_group_had_committed_is_carried_until_a_mark_gives_metadata(self) -> None:
        metadata = OffsetMetadata()
        metadata.started_with("from the predecessor")
        assert (metadata.latest, metadata.at(1)) == ("from the predecessor",) * 2
        metadata.mark(2, "mine")
        metadata.started_with("late")  # an assignment answer never overrides a mark
        assert (metadata.latest, metadata.at(2)) == ("mine", "mine")

    def test_lanes_marking_out_of_order_commit_the_highest_reached(self) -> None:
        metadata = OffsetMetadata()
        metadata.mark(10, "lane a at 9")
        metadata.mark(4, "lane b at 3")
        assert metadata.latest == "lane a at 9", "the highest mark, not the latest in time"
        assert metadata.at(6) == "lane b at 3"
        assert metadata.at(12) == "lane a at 9"
        metadata.mark(5, "stale")
        assert metadata.at(12) == "lane a at 9", "a mark below what was carried changes nothing"

    def test_the_same_offset_marked_again_takes_the_new_metadata(self) -> None:
        metadata = OffsetMetadata()
        metadata.mark(3, "old")
        metadata.mark(3, "new")
        assert (metadata.latest, metadata.at(3)) == ("new", "new")


class FakeClient:
    """Records commits: (offsets, asynchronous, metadata)."""

    def __init__(self) -> None:
        self.commits: list[tuple[list[tuple[str, int, int]], bool, dict[Partition, str]]] = []

    def commit(
        self,
        offsets: Iterable[tuple[str, int, int]],
        asynchronous: bool = False,
        metadata: Mapping[Partition, str] | None = None,
    ) -> bool:
        self.commits.append((list(offsets), asynchronous, dict(metadata or {})))
        return True


class Quiet(Consumer):
    def consume(self) -> None:
        return None


def test_the_listener_commits_metadata_with_offsets_and_again_when_only_it_changed() -> None:
    r = rig(Quiet, manual_offset_management=True)
    client, reports = FakeClient(), []
    commits = Commits(client, lambda offsets, sync, started: reports.append(offsets))
    executors = {("orders", 0): r.executor}
    r.executor.mark(3, False, "cursor=2")
    assert commits.marked(executors, sync=False, only=None)
    assert client.commits[-1] == ([("orders", 0, 3)], True, {("orders", 0): "cursor=2"})
    assert reports == [[("orders", 0, 3)]], "the event's offsets stay (topic, partition, offset)"
    commits.marked(executors, sync=False, only=None)
    assert len(client.commits) == 1, "nothing new: no commit"
    r.executor.mark(3, False, "cursor=2b")
    commits.marked(executors, sync=True, only=None)
    assert client.commits[-1] == ([("orders", 0, 3)], False, {("orders", 0): "cursor=2b"})
    r.executor.mark(4, False)
    commits.marked(executors, sync=False, only=None)
    assert client.commits[-1][2] == {("orders", 0): "cursor=2b"}, "it sticks"


def test_an_offset_committed_now_is_not_committed_again_by_the_next_commit() -> None:
    """``mark_as_consumed_sync``: its commit counts as the partition's last, so the listener's
    next commit of what is marked (the same offset, the same metadata) sends nothing."""
    r = rig(Quiet, manual_offset_management=True)
    client = FakeClient()
    commits = Commits(client, lambda *_: None)
    executors = {("orders", 0): r.executor}
    r.executor.mark(3, False, "three")
    assert commits.now("orders", 0, 3, "three")
    assert commits.marked(executors, sync=False, only=None)
    assert client.commits == [([("orders", 0, 3)], False, {("orders", 0): "three"})]
    r.executor.mark(4, False)
    commits.marked(executors, sync=False, only=None)
    assert client.commits[-1] == ([("orders", 0, 4)], True, {("orders", 0): "three"})


def test_an_asynchronous_commit_the_group_refused_is_sent_again() -> None:
    """An asynchronous commit counts as done when sent; once the group refused it, the next
    commit of what is marked sends it again (with its metadata)."""
    r = rig(Quiet, manual_offset_management=True)
    client = FakeClient()
    commits = Commits(client, lambda *_: None)
    executors = {("orders", 0): r.executor}
    r.executor.mark(3, False, "three")
    commits.marked(executors, sync=False, only=None)
    commits.refused([("orders", 0, 2)])  # an older one: what was sent since stands
    commits.marked(executors, sync=False, only=None)
    assert len(client.commits) == 1
    commits.refused([("orders", 0, 3)])
    commits.marked(executors, sync=False, only=None)
    assert len(client.commits) == 2, "sent again"
    assert client.commits[-1] == ([("orders", 0, 3)], True, {("orders", 0): "three"})


def test_a_commit_held_back_by_an_unacknowledged_copy_holds_back_the_metadata_too() -> None:
    r = rig(Quiet, manual_offset_management=True)
    client = FakeClient()
    commits = Commits(client, lambda *_: None)
    r.executor.mark(2, False, "two")
    commits.marked({("orders", 0): r.executor}, sync=False, only=None)
    r.executor.send_held(5, {"topic": "copies", "payload": b"x"}, r.producer)  # 5 waits for it
    r.executor.mark(9, False, "nine")
    commits.marked({("orders", 0): r.executor}, sync=False, only=None)
    assert client.commits[-1] == ([("orders", 0, 5)], True, {("orders", 0): "two"})
    r.producer.handles[-1].deliver()
    commits.marked({("orders", 0): r.executor}, sync=False, only=None)
    assert client.commits[-1] == ([("orders", 0, 9)], True, {("orders", 0): "nine"})


def test_a_sync_mark_commits_its_metadata_now_and_the_consumer_reads_it() -> None:
    seen: list[Any] = []

    class Marking(Consumer):
        def consume(self) -> None:
            seen.append(self.offset_metadata)
            self.mark_as_consumed_sync(self.messages.last, metadata="through 1")
            seen.append(self.offset_metadata)

    r = rig(Marking, manual_offset_management=True)
    r.executor.metadata.started_with("committed before")
    r.executor.add(raws(0, 1), high_watermark=2)
    r.listener.run_jobs()
    assert seen == ["committed before", "through 1"]
    assert ("commit", "orders", 0, 2, "through 1") in r.listener.actions


@pytest.mark.parametrize("metadata", [b"bytes", 42, {"a": 1}])
def test_metadata_that_is_not_a_string_is_refused_naming_it(metadata: Any) -> None:
    failures: list[BaseException] = []

    class Wrong(Consumer):
        def consume(self) -> None:
            for mark in (self.mark_as_consumed, self.mark_as_consumed_sync):
                try:
                    mark(self.messages.last, metadata=metadata)
                except ConfigurationError as exc:
                    failures.append(exc)

    r = rig(Wrong, manual_offset_management=True)
    r.executor.add(raws(0), high_watermark=1)
    r.listener.run_jobs()
    assert [(f.setting, "metadata must be a string" in str(f)) for f in failures] == [
        ("metadata", True),
        ("metadata", True),
    ]
    assert r.executor.marked is None


def test_a_lane_ahead_of_the_others_commits_its_metadata_only_once_they_caught_up() -> None:
    class Cursor(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                self.mark_as_consumed(message, metadata=f"at {message.offset}")

    r = rig(Cursor, virtual_partitions={"max_partitions": 2}, manual_offset_management=True)
    assert isinstance(r.executor, VirtualPartitionExecutor)
    batch = [FakeRaw(0, key=b"a"), FakeRaw(1, key=b"same"), FakeRaw(2, key=b"a")]
    lane_a = r.executor.assigner.lane_of(batch[0])
    assert lane_a != r.executor.assigner.lane_of(batch[1]), "the keys must take two lanes"
    r.executor.add(batch, high_watermark=3)
    r.listener.jobs.pop(0 if lane_a == 0 else 1)()  # lane "a" marks 0 and 2; 1 is not done
    assert r.executor.committable() == 1
    assert r.executor.metadata.at(1) == "at 0", "not 'at 2': offset 1 is not processed yet"
    r.listener.run_jobs()
    assert r.executor.committable() == 3
    assert r.executor.metadata.at(3) == "at 2"


def test_a_transaction_sends_its_marks_metadata_with_its_offset() -> None:
    class Exactly(Consumer):
        def consume(self) -> None:
            with self.transaction():
                self.produce_async(topic="out", payload=b"x")
                self.mark_as_consumed(self.messages.last, metadata="txn")

    r = rig(Exactly, manual_offset_management=True)
    r.executor.add(raws(0, 1), high_watermark=2)
    r.listener.run_jobs()
    [sent] = [call for call in r.transactional.calls if call[0] == "send_offsets"]
    assert sent[1] == [("orders", 0, 2)]
    assert sent[3] == {("orders", 0): "txn"}
    assert r.executor.offset_metadata == "txn"
    assert r.executor.metadata.at(2) == "txn"


def test_a_transaction_without_metadata_keeps_the_partitions() -> None:
    class Exactly(Consumer):
        def consume(self) -> None:
            with self.transaction():
                self.mark_as_consumed(self.messages.last)

    r = rig(Exactly, manual_offset_management=True)
    r.executor.metadata.started_with("kept")
    r.executor.add(raws(0), high_watermark=1)
    r.listener.run_jobs()
    [sent] = [call for call in r.transactional.calls if call[0] == "send_offsets"]
    assert sent[3] == {("orders", 0): "kept"}, "a commit never wipes metadata it did not set"


class TestSeekToATime:
    def test_the_offset_of_the_time_is_asked_and_sought(self) -> None:
        sought: list[int] = []
        when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

        class Rewinding(Consumer):
            def consume(self) -> None:
                sought.append(self.seek(when))

        r = rig(Rewinding)
        r.listener.offsets_by_time[when.timestamp()] = 7
        r.executor.add(raws(10, 11), high_watermark=12)
        r.listener.run_jobs()
        assert sought == [7]
        assert ("offset_for_time", "orders", 0, when.timestamp()) in r.listener.actions
        assert ("seek", "orders", 0, 7) in r.listener.actions
        assert r.executor.marked is None, "a sought batch is not marked"

    @pytest.mark.parametrize("offset", [datetime(2026, 1, 2), "5", 2.5, True, None], ids=repr)
    def test_a_naive_datetime_or_a_non_offset_is_refused_naming_the_argument(
        self, offset: Any
    ) -> None:
        failures: list[ConfigurationError] = []

        class Wrong(Consumer):
            def consume(self) -> None:
                try:
                    self.seek(offset)
                except ConfigurationError as exc:
                    failures.append(exc)

        r = rig(Wrong)
        r.executor.add(raws(0), high_watermark=1)
        r.listener.run_jobs()
        assert [failure.setting for failure in failures] == ["offset"]
        assert not [a for a in r.listener.actions if a[0] in ("seek", "offset_for_time")]
