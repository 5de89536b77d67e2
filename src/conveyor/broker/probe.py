"""Ask a Kafka listener for its metadata over a plain socket.

The development broker is ready when it answers a Metadata request and lists
itself among the live brokers. The probe speaks just enough of the Kafka wire
protocol (Metadata v4, supported from Kafka 1.0 through 4.x) to ask that,
without librdkafka: it is quiet while the broker is still down, and the
`broker` part does not depend on the client library.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

from conveyor.errors import BrokerError

__all__ = ["BrokerNode", "ClusterMetadata", "ProbeError", "probe_metadata"]

_METADATA_API_KEY = 3
_METADATA_VERSION = 4
_CLIENT_ID = b"conveyor-probe"


class ProbeError(BrokerError):
    """The listener did not answer a Metadata request the way a broker would.

    Raised when :func:`probe_metadata` gets an answer that is not a Kafka Metadata response
    (a truncated one, or another protocol on the port).

    What to do: check that the host and port are a Kafka listener's (a plaintext one: the
    probe speaks no TLS or SASL).
    """


@dataclass(frozen=True)
class BrokerNode:
    """One live broker as the metadata lists it."""

    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class ClusterMetadata:
    """What a Metadata response says about the cluster."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerNode, ...]


def probe_metadata(host: str, port: int, timeout: float = 2.0) -> ClusterMetadata:
    """Send one Metadata request to ``host:port`` and parse the answer.

    Raises:
        OSError: nothing accepts connections there (or it hung up).
        ProbeError: something answered, but not like a Kafka broker.
    """
    correlation_id = int(time.monotonic_ns() & 0x7FFFFFFF)
    header = struct.pack(
        ">hhih", _METADATA_API_KEY, _METADATA_VERSION, correlation_id, len(_CLIENT_ID)
    )
    body = struct.pack(">ib", 0, 0)  # no topics, do not auto-create
    request = header + _CLIENT_ID + body
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(request)) + request)
        (size,) = struct.unpack(">i", _read_exactly(sock, 4))
        if size < 8 or size > 16 * 1024 * 1024:
            raise ProbeError(f"unexpected response size {size}")
        payload = _read_exactly(sock, size)
    return _parse_metadata_v4(payload, correlation_id)


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(count - len(chunks))
        if not chunk:
            raise ProbeError("connection closed before the response was complete")
        chunks.extend(chunk)
    return bytes(chunks)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def _take(self, fmt: str) -> int:
        try:
            (value,) = struct.unpack_from(fmt, self._data, self._at)
        except struct.error as exc:
            raise ProbeError("truncated Metadata response") from exc
        self._at += struct.calcsize(fmt)
        return int(value)

    def int32(self) -> int:
        return self._take(">i")

    def string(self) -> str | None:
        length = self._take(">h")
        if length < 0:
            return None
        raw = self._data[self._at : self._at + length]
        if len(raw) != length:
            raise ProbeError("truncated Metadata response")
        self._at += length
        return raw.decode("utf-8", errors="replace")


def _parse_metadata_v4(payload: bytes, correlation_id: int) -> ClusterMetadata:
    reader = _Reader(payload)
    if reader.int32() != correlation_id:
        raise ProbeError("the response does not match the request (not a Kafka listener?)")
    reader.int32()  # throttle_time_ms
    brokers = []
    for _ in range(reader.int32()):
        node_id = reader.int32()
        host = reader.string() or ""
        port = reader.int32()
        reader.string()  # rack
        brokers.append(BrokerNode(node_id, host, port))
    cluster_id = reader.string()
    controller_id = reader.int32()
    return ClusterMetadata(cluster_id, controller_id, tuple(brokers))
