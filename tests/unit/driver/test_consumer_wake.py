"""Waking a consumer's poll from another thread (librdkafka's queue yield, reached through
ctypes as loop serving reaches its calls), without a broker."""

from __future__ import annotations

import threading

from conveyor.driver.consumers import ConsumerClient

_NO_BROKER = {"bootstrap.servers": "127.0.0.1:1", "group.id": "wake", "log_level": 0}


def test_a_wake_ends_the_wait_of_a_poll_in_another_thread() -> None:
    """A poll asked to wait a minute returns once woken (confluent-kafka lets no other thread
    call the consumer meanwhile: the wake goes to librdkafka's queue directly). A wake that
    comes before the poll waits makes it return at once, so the order does not matter."""
    client = ConsumerClient(_NO_BROKER, wakeable=True)
    try:
        assert client.wakeable, "confluent-kafka's tested version: the consumer can be woken"
        returned = threading.Event()

        def poll() -> None:
            client.poll_batch(60.0, 10)
            returned.set()

        thread = threading.Thread(target=poll, daemon=True)
        thread.start()
        client.wake()
        assert returned.wait(15), "the poll waited on"
    finally:
        client.close()
    client.wake()  # after close: nothing to wake, nothing raised


def test_a_consumer_not_asked_to_be_wakeable_has_no_wake() -> None:
    client = ConsumerClient(_NO_BROKER)
    try:
        assert not client.wakeable
        client.wake()  # nothing happens
    finally:
        client.close()
