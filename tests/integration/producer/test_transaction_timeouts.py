"""A transaction call that times out (the broker frozen, its coordinator silent) is resumed,
as librdkafka asks: until it is, librdkafka refuses every other transactional call with
``_CONFLICT``, and an exactly-once consumer retried its batch against that refusal for good
(the soak's short form, once in a dozen runs)."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conveyor import Admin, Monitor, Producer
from conveyor.broker import DevelopmentBroker
from conveyor.producer import transactions
from helpers import freeze_process, read_topic

pytestmark = pytest.mark.xdist_group("brokers")  # xdist: see tests/conftest.py


def freeze(
    broker: DevelopmentBroker, until: threading.Event, timeline: list[str]
) -> Callable[[], None]:
    """Stop the broker with SIGSTOP (connections stay open, nothing answers) until ``until``
    is set (a positive marker: what the test waits to see happen against a frozen broker),
    30 s at most; returns the thaw, to let it go at once."""
    status = broker.status()
    assert status is not None
    freeze_process(status.pid)
    timeline.append(f"frozen pid {status.pid}")
    thawed = threading.Event()

    def thaw() -> None:
        if not thawed.is_set():
            thawed.set()
            os.kill(status.pid, signal.SIGCONT)
            timeline.append(
                f"thawed ({'after its event' if until.is_set() else 'at 30 s or at the end'})"
            )

    threading.Thread(target=lambda: (until.wait(30), thaw()), daemon=True).start()
    return thaw


@pytest.fixture
def frozen_rig(
    own_broker: DevelopmentBroker, own_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Producer, list[str], Callable[[str], None], str, list[str]]]:
    """A transactional producer on a broker of its own that has committed a first transaction
    (``first``), the error types it reported, a ``freeze(error_type)`` of its broker until
    that error was reported (each call of librdkafka's then waits 1 s, not 30), and the
    broker's bootstrap servers."""
    bootstrap = own_bootstrap
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topic("frozen-tx", partitions=1)
    monitor = Monitor()
    errors: list[str] = []
    reported: dict[str, threading.Event] = {}

    def record(event: dict[str, str]) -> None:
        errors.append(event["type"])
        reported.setdefault(event["type"], threading.Event()).set()

    monitor.subscribe("error.occurred", record)
    started = time.monotonic()
    timeline: list[str] = []  # for a failure's message: what happened when

    def noted(event: Any) -> None:
        details = {k: v for k, v in event.items() if k not in ("producer_id", "time")}
        timeline.append(f"{time.monotonic() - started:5.1f} s {event.name} {details!r}")

    for name in ("error.occurred", "transaction.aborted", "transaction.committed",
                 "producer.reloaded"):  # fmt: skip
        monitor.subscribe(name, noted)
    settings = {"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex}"}
    thaws: list[Callable[[], None]] = []
    with Producer(settings, monitor=monitor) as producer:
        with producer.transaction():
            producer.produce_sync(topic="frozen-tx", payload=b"first")
        monkeypatch.setattr(transactions, "_TIMEOUT", 1.0)  # one call's wait, not the resuming
        try:
            yield (
                producer,
                errors,
                lambda kind: thaws.append(
                    freeze(own_broker, reported.setdefault(kind, threading.Event()), timeline)
                ),
                bootstrap,
                timeline,
            )
        finally:
            for thaw in thaws:
                thaw()


def test_an_abort_that_timed_out_is_finished_before_the_next_transaction(frozen_rig) -> None:
    producer, errors, freeze_for, bootstrap, timeline = frozen_rig

    def aborted_while_frozen() -> None:
        with producer.transaction():
            producer.produce_sync(topic="frozen-tx", payload=b"aborted")
            freeze_for("transaction.abort.timeout")  # until the abort's first call timed out
            producer.produce_async(topic="frozen-tx", payload=b"aborted too")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        aborted_while_frozen()
    with producer.transaction():  # it was refused: "Conflicting abort_transaction API call"
        producer.produce_sync(topic="frozen-tx", payload=b"after")
    # the abort did wait on the frozen broker (a failure here: once under load, no error at all)
    assert "transaction.abort.timeout" in errors, timeline
    assert read_committed(bootstrap, "frozen-tx", 2) == [b"first", b"after"]


def test_a_commit_that_timed_out_is_finished_not_aborted(frozen_rig) -> None:
    producer, errors, freeze_for, bootstrap, timeline = frozen_rig
    with producer.transaction():
        producer.produce_sync(topic="frozen-tx", payload=b"committed late")
        freeze_for("transaction.commit.timeout")  # until the commit's first call timed out
        producer.produce_async(topic="frozen-tx", payload=b"committed late too")
    with producer.transaction():
        producer.produce_sync(topic="frozen-tx", payload=b"after")
    assert "transaction.commit.timeout" in errors, timeline
    assert "transaction.abort.error" not in errors, timeline
    assert read_committed(bootstrap, "frozen-tx", 4) == [
        b"first", b"committed late", b"committed late too", b"after",
    ]  # fmt: skip


def read_committed(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """The first ``count`` payloads a read_committed reader sees (an aborted one among them
    would come before what was committed after it)."""
    return [
        m.value()
        for m in read_topic(bootstrap, topic, count, **{"isolation.level": "read_committed"})
    ]
