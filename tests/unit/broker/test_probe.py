"""The metadata probe parses a broker's answer and rejects what is not Kafka."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from conveyor.broker.probe import BrokerNode, ProbeError, probe_metadata


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _metadata_v4_response(correlation_id: int) -> bytes:
    body = struct.pack(">ii", correlation_id, 0)  # correlation id, throttle
    body += struct.pack(">i", 2)
    body += struct.pack(">i", 1) + _string("127.0.0.1") + struct.pack(">i", 9092) + _string(None)
    body += struct.pack(">i", 2) + _string("127.0.0.1") + struct.pack(">i", 9094) + _string("r1")
    body += _string("cluster-abc") + struct.pack(">i", 1) + struct.pack(">i", 0)
    return struct.pack(">i", len(body)) + body


@pytest.fixture
def fake_listener() -> Iterator[tuple[int, list[bytes]]]:
    """A one-shot TCP listener; the test decides what it answers by pushing bytes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    replies: list[bytes] = []

    def serve() -> None:
        connection, _ = server.accept()
        with connection:
            size = struct.unpack(">i", connection.recv(4))[0]
            request = b""
            while len(request) < size:
                request += connection.recv(size - len(request))
            api_key, version, correlation_id = struct.unpack(">hhi", request[:8])
            assert (api_key, version) == (3, 4)
            reply = replies[0] if replies else _metadata_v4_response(correlation_id)
            connection.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], replies
    thread.join(timeout=5)
    server.close()


def test_parses_brokers_cluster_id_and_controller(fake_listener: tuple[int, list[bytes]]) -> None:
    port, _ = fake_listener
    metadata = probe_metadata("127.0.0.1", port)
    assert metadata.cluster_id == "cluster-abc"
    assert metadata.controller_id == 1
    assert metadata.brokers == (BrokerNode(1, "127.0.0.1", 9092), BrokerNode(2, "127.0.0.1", 9094))


def test_an_answer_for_another_request_is_not_kafka(fake_listener: tuple[int, list[bytes]]) -> None:
    port, replies = fake_listener
    replies.append(_metadata_v4_response(correlation_id=-5))
    with pytest.raises(ProbeError, match="does not match"):
        probe_metadata("127.0.0.1", port)


def test_a_listener_that_hangs_up_is_not_kafka(fake_listener: tuple[int, list[bytes]]) -> None:
    port, replies = fake_listener
    replies.append(b"")
    with pytest.raises(ProbeError, match="closed"):
        probe_metadata("127.0.0.1", port)


def test_nothing_listening_raises_os_error() -> None:
    with socket.socket() as placeholder:
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    with pytest.raises(ConnectionRefusedError):
        probe_metadata("127.0.0.1", port, timeout=1.0)
