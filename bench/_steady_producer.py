"""A steady producer for bench/connector_latency.py, in a process of its own (so that it does
not share the connector's GIL): ``python _steady_producer.py BOOTSTRAP TOPIC SECONDS RATE
KEYS [FIRST]`` sends ``RATE`` messages a second round-robin over ``KEYS`` keys (``k0``...), each
a JSON object with its key's sequence number and its send time, numbering from message
``FIRST`` (a run after a warm-up goes on where the warm-up ended), and prints how many it sent."""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import Producer


def main() -> None:
    bootstrap, topic = sys.argv[1], sys.argv[2]
    seconds, rate, keys = float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    first = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    # idempotent: a request retried after a stall keeps its partition's order, so an order
    # the connector benchmarks find broken is the connector's, not a producer retry's
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True}
    )
    count = int(seconds * rate)
    started = time.perf_counter()
    for index in range(count):
        pause = started + index / rate - time.perf_counter()
        if pause > 0:
            time.sleep(pause)  # the pace itself: there is nothing to wait on
        number = first + index
        body = json.dumps({"seq": number // keys, "sent": time.time()}).encode()
        producer.produce(topic, body, f"k{number % keys}".encode())
        producer.poll(0)
    if producer.flush(30):
        raise SystemExit("messages left undelivered after 30 s")
    print(count, flush=True)


main()
