"""A counting app with a state store, for ``bench/state_restore.py``'s restarts: it prints one
JSON line with the wall time its first batch was processed, then runs until killed.

Arguments: bootstrap, topic, group, state folder."""

from __future__ import annotations

import json
import sys
import threading
import time

from conveyor import App, Consumer
from conveyor.state import Store


def main() -> None:
    bootstrap, topic, group, folder = sys.argv[1:5]
    first = threading.Event()

    class Counting(Consumer):
        def consume(self) -> None:
            counts = self.state
            for message in self.messages:
                counts[message.key] = counts.get(message.key, 0) + 1
            if not first.is_set():
                first.set()
                print(json.dumps({"first": time.time()}), flush=True)

    app = App(
        client_id="bench-restart",
        kafka={
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            # static membership: a restarted process takes its partitions back at once,
            # without waiting for the killed one's session to time out
            "group.instance.id": "bench-restart-0",
            "session.timeout.ms": 45_000,
        },
        state_dir=folder,
        max_wait_time=0.05,
    )
    app.routes.topic(topic, Counting, state=Store())
    app.run()


if __name__ == "__main__":
    main()
