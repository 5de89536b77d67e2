"""A transaction call that times out (the broker frozen, its coordinator silent) is resumed,
as librdkafka asks: until it is, librdkafka refuses every other transactional call with
``_CONFLICT``, and an exactly-once consumer retried its batch against that refusal for good
(the soak's short form, once in a dozen runs)."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections.abc import Callable, Iterator

import pytest

from conveyor import Admin, Monitor, Producer
from conveyor.broker import DevelopmentBroker
from conveyor.producer import transactions
from helpers import read_topic


def freeze(broker: DevelopmentBroker, seconds: float) -> Callable[[], None]:
    """Stop the broker with SIGSTOP (connections stay open, nothing answers) for ``seconds``;
    returns the thaw, to let it go at once."""
    status = broker.status()
    assert status is not None
    timer = threading.Timer(seconds, os.kill, (status.pid, signal.SIGCONT))
    os.kill(status.pid, signal.SIGSTOP)
    timer.start()

    def thaw() -> None:
        timer.cancel()
        os.kill(status.pid, signal.SIGCONT)

    return thaw


@pytest.fixture
def frozen_rig(
    own_broker: DevelopmentBroker, own_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Producer, list[str], Callable[[float], None], str]]:
    """A transactional producer on a broker of its own that has committed a first transaction
    (``first``), the error types it reported, a ``freeze(seconds)`` of its broker (each call
    of librdkafka's then waits 1 s, not 30), and the broker's bootstrap servers."""
    bootstrap = own_bootstrap
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topic("frozen-tx", partitions=1)
    monitor = Monitor()
    errors: list[str] = []
    monitor.subscribe("error.occurred", lambda event: errors.append(event["type"]))
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
                lambda seconds: thaws.append(freeze(own_broker, seconds)),
                bootstrap,
            )
        finally:
            for thaw in thaws:
                thaw()


def test_an_abort_that_timed_out_is_finished_before_the_next_transaction(frozen_rig) -> None:
    producer, errors, freeze_for, bootstrap = frozen_rig

    def aborted_while_frozen() -> None:
        with producer.transaction():
            producer.produce_sync(topic="frozen-tx", payload=b"aborted")
            freeze_for(4.0)  # the abort's first calls time out
            producer.produce_async(topic="frozen-tx", payload=b"aborted too")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        aborted_while_frozen()
    with producer.transaction():  # it was refused: "Conflicting abort_transaction API call"
        producer.produce_sync(topic="frozen-tx", payload=b"after")
    assert "transaction.abort.timeout" in errors  # the abort did wait on the frozen broker
    assert read_committed(bootstrap, "frozen-tx", 2) == [b"first", b"after"]


def test_a_commit_that_timed_out_is_finished_not_aborted(frozen_rig) -> None:
    producer, errors, freeze_for, bootstrap = frozen_rig
    with producer.transaction():
        producer.produce_sync(topic="frozen-tx", payload=b"committed late")
        freeze_for(4.0)  # the commit's first calls time out
        producer.produce_async(topic="frozen-tx", payload=b"committed late too")
    with producer.transaction():
        producer.produce_sync(topic="frozen-tx", payload=b"after")
    assert "transaction.commit.timeout" in errors
    assert "transaction.abort.error" not in errors
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
