"""The soak's load: steady messages keyed ``k0``..``k63`` with a sequence number per key, and
now and then a poison message (a payload that is not JSON).

It writes, about twice a second, the next sequence number of each key it has had
acknowledged to STATE (atomically), and starts from there again: a feeder SIGKILLed and
started again resends what was not acknowledged (possibly twice in the topic: each copy is an
input of its own). SIGTERM flushes, writes the state and exits 0.

    feeder.py BOOTSTRAP TOPIC STATE RATE
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from conveyor import Producer

KEYS = 64
POISON_EVERY = 397  # messages; a prime, so that poison lands on every key in turn
TICKS = 10  # bursts a second


def main() -> None:
    bootstrap, topic, state_path, rate = (
        sys.argv[1],
        sys.argv[2],
        Path(sys.argv[3]),
        int(sys.argv[4]),
    )
    state = json.loads(state_path.read_text()) if state_path.exists() else {"sent": 0, "next": {}}
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    per_tick = max(1, rate // TICKS)
    saved_at = time.monotonic()
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        next_tick = time.monotonic()
        while not stop.is_set():
            burst = []
            for _ in range(per_tick):
                count = state["sent"]
                key = f"k{count % KEYS}"
                seq = state["next"].get(key, 0)
                poison = count % POISON_EVERY == POISON_EVERY - 1
                payload = b"\xffpoison" if poison else json.dumps({"seq": seq}).encode()
                burst.append({"topic": topic, "key": key, "payload": payload})
                state["sent"] = count + 1
                state["next"][key] = seq + 1
            producer.produce_many_sync(burst)  # acknowledged: the state may move past them
            if time.monotonic() - saved_at >= 0.5:
                save(state_path, state)
                saved_at = time.monotonic()
            next_tick += 1 / TICKS
            stop.wait(max(0.0, next_tick - time.monotonic()))
    save(state_path, state)


def save(path: Path, state: dict[str, object]) -> None:
    scratch = path.with_suffix(".tmp")
    scratch.write_text(json.dumps(state))
    os.replace(scratch, path)


if __name__ == "__main__":
    main()
