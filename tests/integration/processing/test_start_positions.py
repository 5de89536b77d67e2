"""Start positions against the real broker: an app stopped while its listener still waits for
the group's committed offsets (held by an open transaction, KIP-447) stops asking at once,
instead of asking on until its shutdown closes the client under it."""

from __future__ import annotations

import logging
import threading
import uuid

import confluent_kafka
import pytest

from conveyor import App, Consumer
from conveyor.instrumentation import events as ev


class Marker(logging.Handler):
    """Sets ``seen`` once a record whose message contains ``text`` is logged."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.DEBUG)
        self.text = text
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()


class Untouched(Consumer):
    """Routes the topic (which stays empty: nothing is consumed)."""

    def consume(self) -> None:
        pass


@pytest.mark.timeout(120)
def test_an_app_stopped_while_its_committed_offsets_are_held_stops_asking(
    kafka_bootstrap: str, new_topic
) -> None:
    topic, group = new_topic(), f"held-{uuid.uuid4().hex[:8]}"
    # An open transaction holding the group's offset of the topic: every fetch of it is
    # answered UNSTABLE_OFFSET_COMMIT until the transaction ends.
    holder = confluent_kafka.Producer({
        "bootstrap.servers": kafka_bootstrap, "transactional.id": f"holder-{group}",
        "transaction.timeout.ms": 45_000,
    })  # fmt: skip
    member = confluent_kafka.Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
    holder.init_transactions(30)
    holder.begin_transaction()
    holder.send_offsets_to_transaction(
        [confluent_kafka.TopicPartition(topic, 0, 1)], member.consumer_group_metadata(), 30
    )
    member.close()
    waiting = Marker("(fencing a predecessor's transaction)")
    abandoned = Marker("stopped while reading the committed offsets")
    loggers = [logging.getLogger("conveyor.positions"), logging.getLogger("conveyor.processing")]
    levels = [logger.level for logger in loggers]
    for logger, marker in zip(loggers, (waiting, abandoned), strict=True):
        logger.addHandler(marker)
        logger.setLevel(logging.INFO)
    errors: list[str] = []
    app = App(
        client_id="held",
        kafka={"bootstrap.servers": kafka_bootstrap, "group.id": group},
        shutdown_timeout=60,  # longer than the transaction: a stop that waited would outlive it
    )
    app.monitor.subscribe(ev.ERROR_OCCURRED, lambda event: errors.append(str(event["error"])))
    app.routes.topic(topic, Untouched)
    aborted = False
    try:
        app.start()
        assert waiting.seen.wait(60), "the listener waits for the held offsets"
        app.stop_and_wait()
        # Still open (the broker aborts it 45-55 s after it began): the stop did not wait for
        # the transaction to end, nor for the shutdown timeout.
        holder.abort_transaction(30)
        aborted = True
        listeners = [
            t for t in threading.enumerate() if t.name.startswith("conveyor-listener-held")
        ]
        for thread in listeners:
            thread.join(10)
        assert not [t for t in listeners if t.is_alive()], "the listener's thread has ended"
        assert not [e for e in errors if "_DESTROY" in e], "no ask after the client closed"
        assert abandoned.seen.is_set(), "the read ended because the app stopped"
        assert app.crash is None
    finally:
        for logger, marker, level in zip(loggers, (waiting, abandoned), levels, strict=True):
            logger.removeHandler(marker)
            logger.setLevel(level)
        if not aborted:
            holder.abort_transaction(30)
