"""WebSocket clients for bench/connector_latency.py, in a process of their own (so that they
do not share the connector's GIL): ``python _ws_clients.py URL KEYS PER_KEY EXPECTED [batch]``
(``batch``: subscribe with ``"batch": true``, records waiting come as one JSON array).

Connects ``KEYS * PER_KEY`` clients, each subscribed to one key's channel; prints ``ready``
once all are subscribed, then receives until each got ``EXPECTED`` messages (or 120 s), and
prints one JSON line: end-to-end latencies (produce -> received, ms) and order violations
(a key's sequence number not one more than the previous one at a client)."""

from __future__ import annotations

import asyncio
import json
import sys
import time

import websockets


class Ready:
    """How many clients have subscribed, of how many."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.count = 0


async def client(
    url: str, channel: str, expected: int, samples: list[float], ready: Ready, batch: bool
) -> int:
    violations = 0
    async with websockets.connect(url, max_queue=None) as socket:
        await socket.send(json.dumps({"subscribe": [channel], "batch": batch}))
        json.loads(await socket.recv())  # {"subscribed": [...]}
        ready.count += 1
        if ready.count == ready.total:
            print("ready", flush=True)
        previous = -1
        deadline = time.monotonic() + 120
        count = 0
        while count < expected:
            text = await asyncio.wait_for(socket.recv(), max(0.1, deadline - time.monotonic()))
            received = time.time()
            records = json.loads(text)
            for record in records if isinstance(records, list) else [records]:
                payload = record["payload"]
                samples.append((received - payload["sent"]) * 1000)
                if payload["seq"] != previous + 1:
                    violations += 1
                previous = payload["seq"]
                count += 1
    return violations


async def main() -> None:
    url, keys, per_key, expected = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    batch = len(sys.argv) > 5 and sys.argv[5] == "batch"
    ready = Ready(keys * per_key)
    samples: list[float] = []
    results = await asyncio.gather(
        *(
            client(url, f"k{key}", expected, samples, ready, batch)
            for key in range(keys)
            for _ in range(per_key)
        ),
        return_exceptions=True,
    )
    errors = [repr(r) for r in results if isinstance(r, BaseException)]
    violations = sum(r for r in results if isinstance(r, int))
    print(
        json.dumps({"samples": samples, "violations": violations, "errors": errors[:3]}), flush=True
    )


asyncio.run(main())
