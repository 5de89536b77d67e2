"""WebSocket clients for bench/connector_latency.py, in a process of their own (so that they
do not share the connector's GIL): ``python _ws_clients.py URL KEYS PER_KEY EXPECTED WARM
batch|single`` (``batch``: subscribe with ``"batch": true``, records waiting come as one JSON
array).

Connects ``KEYS * PER_KEY`` clients, each subscribed to one key's channel; prints ``ready``
once all are subscribed, then receives until each got ``EXPECTED`` messages (or 120 s), and
prints one JSON line: end-to-end latencies (produce -> received, ms) of the records after the
first ``WARM`` of each key (the warm-up), and order violations (a key's sequence number not
one more than the previous one at a client) over all of them.

The clients speak RFC 6455 themselves over plain non-blocking sockets and one ``selectors``
loop: they stand for browsers, and a client library on asyncio spent more of this 2-core
machine's CPU receiving the fan-out than the connector spent sending it, which the
connector's own latency then paid for.
"""

from __future__ import annotations

import base64
import json
import os
import selectors
import socket
import struct
import sys
import time
from urllib.parse import urlsplit


def masked_frame(opcode: int, payload: bytes) -> bytes:
    """A client's frame (clients must mask; RFC 6455 5.3)."""
    mask = os.urandom(4)
    length = len(payload)
    if length < 126:
        header = struct.pack("!BB", 0x80 | opcode, 0x80 | length)
    elif length < 1 << 16:
        header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, length)
    else:
        header = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, length)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return header + mask + body


class Client:
    """One connection subscribed to one channel: its unparsed bytes and its order check."""

    def __init__(self, host: str, port: int, path: str, channel: str, batch: bool) -> None:
        self.channel = channel
        self.sock = socket.create_connection((host, port))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed during the handshake")
            response += chunk
        head, _, self.buffer = response.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError(head.decode(errors="replace"))
        request = json.dumps({"subscribe": [channel], "batch": batch}).encode()
        self.sock.sendall(masked_frame(0x1, request))
        self.sock.setblocking(False)
        self.subscribed = False
        self.count = 0
        self.previous = -1
        self.violations = 0

    def frames(self) -> list[tuple[int, bytes]]:
        """The complete frames in the buffer (servers do not mask)."""
        out: list[tuple[int, bytes]] = []
        buffer = self.buffer
        at = 0
        while len(buffer) - at >= 2:
            opcode = buffer[at] & 0x0F
            length = buffer[at + 1] & 0x7F
            start = at + 2
            if length == 126:
                if len(buffer) - at < 4:
                    break
                (length,) = struct.unpack_from("!H", buffer, at + 2)
                start = at + 4
            elif length == 127:
                if len(buffer) - at < 10:
                    break
                (length,) = struct.unpack_from("!Q", buffer, at + 2)
                start = at + 10
            if len(buffer) < start + length:
                break
            out.append((opcode, buffer[start : start + length]))
            at = start + length
        self.buffer = buffer[at:]
        return out


def main() -> None:
    url, keys, per_key, expected = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    warm, batch = int(sys.argv[5]), sys.argv[6] == "batch"
    parts = urlsplit(url)
    host, port, path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/"
    selector = selectors.DefaultSelector()
    clients = [
        Client(host, port, path, f"k{key}", batch) for key in range(keys) for _ in range(per_key)
    ]
    for client in clients:
        selector.register(client.sock, selectors.EVENT_READ, client)
    samples: list[float] = []
    errors: list[str] = []
    waiting = len(clients)  # for an acknowledgement, then for their records
    announced = False
    deadline = time.monotonic() + 120
    while waiting and time.monotonic() < deadline:
        for selected, _ in selector.select(1.0):
            client: Client = selected.data
            try:
                chunk = client.sock.recv(262_144)
            except BlockingIOError:
                continue
            if not chunk:
                errors.append(f"{client.channel}: closed after {client.count} records")
                selector.unregister(client.sock)
                waiting -= 1
                continue
            received = time.time()
            client.buffer += chunk
            for opcode, payload in client.frames():
                if opcode == 0x9:  # ping: answer, or the server closes the connection
                    client.sock.sendall(masked_frame(0xA, payload))
                    continue
                if opcode == 0x8:
                    code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 0
                    errors.append(f"{client.channel}: closed by the server ({code})")
                    selector.unregister(client.sock)
                    waiting -= 1
                    break
                message = json.loads(payload)
                if not client.subscribed:  # {"subscribed": [...]}
                    client.subscribed = True
                    waiting -= 1
                    if waiting == 0 and not announced:
                        announced, waiting = True, len(clients)
                        print("ready", flush=True)
                    continue
                for record in message if isinstance(message, list) else [message]:
                    body = record["payload"]
                    if body["seq"] >= warm:
                        samples.append((received - body["sent"]) * 1000)
                    if body["seq"] != client.previous + 1:
                        client.violations += 1
                    client.previous = body["seq"]
                    client.count += 1
                if client.count >= expected:
                    selector.unregister(client.sock)
                    waiting -= 1
                    break
    if waiting:
        errors.append(f"{waiting} clients did not get all {expected} records in time")
    print(
        json.dumps(
            {
                "samples": samples,
                "violations": sum(client.violations for client in clients),
                "errors": errors[:3],
            }
        ),
        flush=True,
    )


main()
