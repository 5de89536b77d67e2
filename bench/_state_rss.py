"""An app restores its stores over many partitions, for ``bench/state_restore.py``: prints the
growth of this process's resident memory (MB) from before the app was built to when every
partition was restored and processed a message. A process of its own, so that nothing the
benchmark did before sits in its memory.

Arguments: bootstrap, topic, group, state folder, partitions."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from conveyor import App, Consumer
from conveyor.state import Store


def rss() -> int:
    """This process's resident memory, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main() -> None:
    bootstrap, topic, group, folder, count = sys.argv[1:6]
    partitions = int(count)
    processed: set[int] = set()
    every = threading.Condition()

    class Counting(Consumer):
        def consume(self) -> None:
            counts = self.state
            for message in self.messages:
                counts[message.key] = counts.get(message.key, 0) + 1
            with every:
                processed.add(self.partition)
                every.notify_all()

    before = rss()
    app = App(
        client_id="bench-rss",
        kafka={"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"},
        state_dir=folder,
        max_wait_time=0.05,
    )
    app.routes.topic(topic, Counting, state=Store())
    app.start()
    try:
        with every:
            if not every.wait_for(lambda: len(processed) == partitions, 900):
                raise RuntimeError(f"only {len(processed)} of {partitions} partitions processed")
        print(json.dumps({"mb": (rss() - before) / 1e6}), flush=True)
    finally:
        app.stop_and_wait()


if __name__ == "__main__":
    main()
