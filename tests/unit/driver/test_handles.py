"""Handles wake their waiters when the result arrives, and time out at their deadline."""

from __future__ import annotations

import concurrent.futures
import gc
import threading
import time
from functools import partial
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from conveyor.driver.handles import BatchDeliveryHandle, DeliveryHandle, FutureHandle
from conveyor.errors import BatchDeliveryError, WaitTimeoutError
from conveyor.errors import KafkaError as ConveyorKafkaError


class FakeMessage:
    """Stands in for librdkafka's delivery-report message (pure logic, no broker); a
    ``partition`` of ``None`` is librdkafka's "none chosen yet"."""

    def __init__(self, partition: int | None = 0, offset: int = 0) -> None:
        self._partition = partition
        self._offset = offset

    def topic(self) -> str:
        return "t"

    def partition(self) -> int | None:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_000)


def FakeError() -> KafkaError:
    return KafkaError(KafkaError._MSG_TIMED_OUT, "Local: Message timed out", retriable=True)


def test_a_waiter_is_woken_by_the_delivery() -> None:
    handle = DeliveryHandle()
    handle._label = "L"
    threading.Timer(0.05, handle, args=(None, FakeMessage(2, 9))).start()
    started = time.monotonic()
    report = handle.wait(5)
    assert time.monotonic() - started < 1
    assert (report.topic, report.partition, report.offset, report.label) == ("t", 2, 9, "L")
    assert report.timestamp == 1_700_000_000_000


def test_many_waiters_of_one_handle_all_wake() -> None:
    handle = DeliveryHandle()
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(handle.wait(5))) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(0.05)  # let them block (test set-up, not a wait path)
    handle(None, FakeMessage())
    for thread in threads:
        thread.join(5)
    assert len(results) == 4


def test_done_callbacks_run_once_on_delivery_or_at_once_when_done(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Registered before the report: called by the reporting thread; after it: called at once;
    a callback that raises is logged and does not stop the others."""
    handle = DeliveryHandle()
    handle._fields = None
    handle._label = None
    seen: list[tuple[str, Any]] = []

    def failing(_done: DeliveryHandle) -> None:
        raise RuntimeError("a broken callback")

    handle.add_done_callback(lambda done: seen.append(("before", done.error())))
    handle.add_done_callback(failing)
    assert seen == []
    handle(KafkaError(KafkaError._MSG_TIMED_OUT), FakeMessage())
    handle.add_done_callback(lambda done: seen.append(("after", done.done())))
    assert [name for name, _ in seen] == ["before", "after"]
    assert seen[0][1] is not None, "the callback sees the failure"
    assert "done callback raised" in caplog.text


def test_wait_times_out_at_the_deadline() -> None:
    handle = DeliveryHandle()
    started = time.monotonic()
    with pytest.raises(WaitTimeoutError):
        handle.wait(0.1)
    assert 0.09 <= time.monotonic() - started < 1
    assert not handle.done()


def test_an_error_report_raises_with_librdkafkas_name() -> None:
    handle = DeliveryHandle()
    handle(FakeError(), FakeMessage(1))
    error = handle.error()
    assert error is not None
    assert (error.name, error.code, error.retriable, error.topic, error.partition) == (
        "_MSG_TIMED_OUT", -192, True, "t", 1,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("code", "persistence"),
    [
        (KafkaError._MSG_TIMED_OUT, "possibly_persisted"),  # sent, its acknowledgement lost?
        (KafkaError.REQUEST_TIMED_OUT, "possibly_persisted"),
        (KafkaError._PURGE_INFLIGHT, "possibly_persisted"),
        (KafkaError._PURGE_QUEUE, "not_persisted"),  # never left the client
        (KafkaError.MSG_SIZE_TOO_LARGE, "not_persisted"),  # refused whole by the broker
        (KafkaError.UNKNOWN_TOPIC_OR_PART, "not_persisted"),
        (KafkaError.NOT_ENOUGH_REPLICAS, "not_persisted"),
    ],
)
def test_a_delivery_error_says_whether_the_message_may_be_in_the_log(
    code: int, persistence: str
) -> None:
    handle = DeliveryHandle()
    handle(KafkaError(code), FakeMessage(1))
    error = handle.error()
    assert error is not None
    assert error.persistence == persistence


def test_a_message_that_never_had_a_partition_was_not_persisted() -> None:
    """A timeout of a message librdkafka never gave a partition (its topic's metadata never
    came) means it never left the client: not persisted, and the error says so, not that it
    may have been written."""
    handle = DeliveryHandle()
    handle(FakeError(), FakeMessage(partition=None))
    error = handle.error()
    assert error is not None
    assert (error.persistence, error.partition) == ("not_persisted", None)
    assert "never reached a broker" in str(error)
    assert "may have been written" not in str(error)


class Asked:
    """A clarify that records the question and its thread, and answers when told."""

    def __init__(self) -> None:
        self.questions: list[tuple[tuple[str, ...], Any]] = []
        self.threads: list[threading.Thread] = []

    def __call__(self, topics: Any, then: Any) -> None:
        self.questions.append((tuple(topics), then))
        self.threads.append(threading.current_thread())

    def answer(self, **verdicts: bool | None) -> None:
        for _, then in self.questions:
            then(verdicts)


def test_a_timed_out_delivery_completes_once_asked_whether_its_topic_exists() -> None:
    """The report of a timed-out delivery is not the end: the handle completes when the
    cluster was asked about its topic (off the serving thread), and a topic that does not exist
    makes it not persisted, said once, without "may have been written"."""
    asked, told = Asked(), []
    bound = DeliveryHandle.bound_to(partial(lambda *args: told.append(args)), clarify=asked)
    handle = bound()
    handle._fields = None
    handle(FakeError(), FakeMessage(partition=3))
    assert [topics for topics, _ in asked.questions] == [("t",)]
    assert not handle.done(), "completed only once asked"
    assert told == []
    asked.answer(t=True)
    assert handle.done()
    error = handle.error()
    assert error is not None
    assert error.persistence == "not_persisted"
    assert "'t' does not exist" in str(error)
    assert "may have been written" not in str(error)
    assert told[0][3].persistence == "not_persisted", "the observer hears the same"


def test_a_timed_out_delivery_to_a_topic_that_exists_may_have_been_written() -> None:
    asked = Asked()
    handle = DeliveryHandle.bound_to(None, clarify=asked)()
    handle._fields = None
    handle(FakeError(), FakeMessage(partition=3))
    asked.answer(t=False)
    error = handle.error()
    assert error is not None
    assert error.persistence == "possibly_persisted"
    assert "may have been written" in str(error)
    assert "does not exist" not in str(error)


def test_a_burst_with_timeouts_completes_once_their_topics_were_asked_about() -> None:
    asked = Asked()
    batch = BatchDeliveryHandle(3, clarify=asked)
    on_delivery = batch.shared_callback()
    on_delivery(None, FakeMessage(0, 0))
    on_delivery(FakeError(), FakeMessage(None))
    on_delivery(KafkaError(KafkaError._PURGE_QUEUE), FakeMessage(None))
    assert [topics for topics, _ in asked.questions] == [("t",)], "asked once per topic"
    assert not batch.done()
    asked.answer(t=True)
    with pytest.raises(BatchDeliveryError) as raised:
        batch.wait(0)
    first = raised.value.failures[0]
    assert "'t' does not exist" in str(first)
    assert first.persistence == "not_persisted"


def test_a_burst_completes_after_its_last_delivery() -> None:
    batch = BatchDeliveryHandle(3)
    on_delivery = batch.shared_callback()
    for offset in range(2):
        on_delivery(None, FakeMessage(0, offset))
    assert not batch.done()
    batch.labeled("last")(None, FakeMessage(0, 2))
    assert batch.done()
    reports = batch.wait(0)
    assert [(r.offset, r.label) for r in reports] == [(2, "last")]


def test_a_burst_with_failures_lists_them() -> None:
    batch = BatchDeliveryHandle(2, keep_reports=True)
    on_delivery = batch.shared_callback()
    on_delivery(None, FakeMessage(0, 0))
    on_delivery(FakeError(), FakeMessage(0, 1))
    with pytest.raises(BatchDeliveryError) as raised:
        batch.wait(0)
    assert raised.value.delivered == 1
    assert [failure.name for failure in raised.value.failures] == ["_MSG_TIMED_OUT"]


def test_a_truncated_burst_completes_with_what_was_sent() -> None:
    batch = BatchDeliveryHandle(5)
    on_delivery = batch.shared_callback()
    on_delivery(None, FakeMessage())
    on_delivery(None, FakeMessage())
    batch.truncate(2)
    assert batch.done()
    empty = BatchDeliveryHandle(0)
    assert empty.done()


def test_a_burst_is_freed_without_the_garbage_collector() -> None:
    """No reference cycle: once its callback is gone (librdkafka served every message), the
    handle goes at once, not at Python's next full collection."""
    gc.disable()
    try:
        batch = BatchDeliveryHandle(1)
        on_delivery = batch.shared_callback()
        on_delivery(None, FakeMessage())
        alive = id(batch)
        del batch, on_delivery
        assert alive not in {id(o) for o in gc.get_objects() if type(o) is BatchDeliveryHandle}
    finally:
        gc.enable()


def test_future_handles_wake_on_the_future_and_map_errors() -> None:
    future: concurrent.futures.Future[int] = concurrent.futures.Future()
    handle = FutureHandle(future, "create topic orders")
    threading.Timer(0.05, future.set_result, args=(7,)).start()
    assert handle.wait(5) == 7
    assert handle.done()

    failing: concurrent.futures.Future[int] = concurrent.futures.Future()
    failing.set_exception(KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS)))
    with pytest.raises(ConveyorKafkaError, match="create topic orders failed") as raised:
        FutureHandle(failing, "create topic orders").wait(1)
    assert raised.value.name == "TOPIC_ALREADY_EXISTS"

    pending = FutureHandle(concurrent.futures.Future(), "describe cluster")
    with pytest.raises(WaitTimeoutError, match="describe cluster did not finish"):
        pending.wait(0.05)
