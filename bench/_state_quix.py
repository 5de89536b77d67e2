"""Quix Streams' side of bench/stateful.py, run with the peers' interpreter (Quix Streams is
never among Conveyor's dependencies): count per key, or a 1 s tumbling window count per key,
over a filled topic, with Quix's defaults (RocksDB stores with changelog topics, at least
once, a 5 s commit interval). Prints the rate (msgs/s between 10 % and 100 % of the messages,
as the bench's RateMeter defines it) as one JSON line.

For bench/state_restore.py, ``restore``: the count's store restored from its changelog
(``changelog__GROUP--TOPIC--default``, filled by the bench) into an empty state folder; prints
the seconds from Quix's "Beginning recovery check" to its "Recovery process complete" (its
own log lines, read by a handler on its logger), then stops.

    python _state_quix.py BOOTSTRAP TOPIC COUNT count|window|restore STATE_DIR GROUP
"""

from __future__ import annotations

import json
import logging
import sys
import time
from datetime import timedelta
from typing import Any

from quixstreams import Application


def main() -> None:
    bootstrap, topic_name, count, variant, state_dir, group = sys.argv[1:7]
    total = int(count)
    threshold = max(1, total // 10)
    seen = 0
    marks: dict[str, tuple[float, int]] = {}
    app = Application(
        broker_address=bootstrap,
        consumer_group=group,
        auto_offset_reset="earliest",
        state_dir=state_dir,
        loglevel="INFO" if variant == "restore" else "WARNING",
    )
    if variant == "restore":
        restore(app, topic_name)
        return

    def meter(value: bytes) -> None:
        nonlocal seen
        seen += 1
        if seen == threshold:
            marks["start"] = (time.perf_counter(), seen)
        if seen == total:
            marks["end"] = (time.perf_counter(), seen)
            app.stop()

    def count_key(value: bytes, state: Any) -> None:  # state: Quix's State
        state.set("count", state.get("count", 0) + 1)

    topic = app.topic(topic_name, key_deserializer="str", value_deserializer="bytes")
    frame = app.dataframe(topic)
    if variant == "count":
        frame = frame.update(count_key, stateful=True)
        frame = frame.update(meter)
    else:
        frame = frame.update(meter)
        frame = frame.tumbling_window(timedelta(seconds=1)).count().final()
    app.run()
    (start, first), (end, last) = marks["start"], marks["end"]
    print(json.dumps({"rate": (last - first) / (end - start)}), flush=True)


def restore(app: Application, topic_name: str) -> None:
    marks: dict[str, float] = {}

    class Recovery(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            text = record.getMessage()
            if text.startswith("Beginning recovery check"):
                marks.setdefault("start", record.created)
            elif text.startswith("Recovery process complete"):
                marks["end"] = record.created
                app.stop()

    logging.getLogger("quixstreams").addHandler(Recovery())
    topic = app.topic(topic_name, key_deserializer="str", value_deserializer="bytes")
    app.dataframe(topic).update(lambda value, state: None, stateful=True)
    app.run()
    print(json.dumps({"seconds": marks["end"] - marks["start"]}), flush=True)


if __name__ == "__main__":
    main()
