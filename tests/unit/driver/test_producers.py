"""A closed client lets librdkafka's producer or admin client go at once (threads, sockets)."""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path

import pytest

from conveyor.driver.admin import AdminConnection
from conveyor.driver.producers import ProducerClient
from conveyor.errors import KafkaError


def librdkafka_threads() -> int:
    """This process's threads that librdkafka started (it names them ``rdk:...``)."""
    count = 0
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
            count += (task / "comm").read_text().startswith("rdk:")
    return count


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="counts threads in /proc")
def test_closing_destroys_librdkafka_now_not_at_a_full_collection() -> None:
    before = librdkafka_threads()
    gc.disable()  # what goes must go by itself: the collector's full collections are rare
    try:
        client = ProducerClient(
            {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}, "closing",
            on_error=lambda _error: None, on_fatal=lambda _error: None,
        )  # fmt: skip
        assert librdkafka_threads() > before
        client.close(0.0)
        assert librdkafka_threads() <= before  # others' clients may have ended meanwhile
        with pytest.raises(KafkaError, match="closed"):
            client.begin_transaction()
    finally:
        gc.enable()


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="counts threads in /proc")
def test_closing_an_admin_connection_destroys_librdkafka_now() -> None:
    before = librdkafka_threads()
    gc.disable()
    try:
        connection = AdminConnection({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
        assert librdkafka_threads() > before
        connection.close()
        assert librdkafka_threads() <= before  # others' clients may have ended meanwhile
        with pytest.raises(KafkaError, match="closed"):
            connection.metadata(None, 1.0)
    finally:
        gc.enable()
