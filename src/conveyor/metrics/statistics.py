"""The few numbers worth a gauge in librdkafka's statistics JSON (``statistics.interval.ms``).

librdkafka emits hundreds of fields per client; these are the ones that explain latency and
back-pressure: round-trip times to each broker, the producer's local queue, and the
consumer's prefetch queue per partition. Pure functions over the parsed JSON.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["HELP", "StatisticsGauge", "gauges_of"]

StatisticsGauge = tuple[str, dict[str, str], float]
"""``(metric name, labels, value)``."""

HELP = {
    "conveyor_librdkafka_queue_messages": "Messages in the client's local queue (librdkafka's "
    "msg_cnt: waiting to be sent or for their delivery report).",
    "conveyor_librdkafka_queue_bytes": "Bytes of the messages in the local queue (msg_size).",
    "conveyor_librdkafka_broker_rtt_seconds": "Round trip to a broker, stat avg or p99 (rtt).",
    "conveyor_librdkafka_broker_outbuf_messages": "Requests waiting to be sent to a broker "
    "(outbuf_msg_cnt).",
    "conveyor_librdkafka_fetch_queue_messages": "Messages fetched and not yet polled, per "
    "partition (fetchq_cnt).",
}
"""The help text of each gauge, from librdkafka's statistics (``statistics.interval.ms``)."""


def gauges_of(client: str, statistics: Mapping[str, Any]) -> Iterator[StatisticsGauge]:
    """The gauges of one client's statistics (times in seconds; librdkafka's are µs)."""
    name = str(statistics.get("name") or client)
    for field, metric in (
        ("msg_cnt", "conveyor_librdkafka_queue_messages"),
        ("msg_size", "conveyor_librdkafka_queue_bytes"),
    ):
        value = statistics.get(field)
        if isinstance(value, int | float):
            yield metric, {"client": name}, float(value)
    for broker in (statistics.get("brokers") or {}).values():
        if not isinstance(broker, Mapping) or broker.get("nodeid", -1) == -1:
            continue  # bootstrap entries: no node id, no meaningful round trips
        rtt = broker.get("rtt")
        if not isinstance(rtt, Mapping) or not rtt.get("cnt"):
            continue
        labels = {"client": name, "broker": str(broker.get("nodename") or broker.get("name"))}
        for stat in ("avg", "p99"):
            value = rtt.get(stat)
            if isinstance(value, int | float):
                yield (
                    "conveyor_librdkafka_broker_rtt_seconds",
                    {**labels, "stat": stat},
                    value / 1e6,
                )
        outbuf = broker.get("outbuf_msg_cnt")
        if isinstance(outbuf, int | float):
            yield "conveyor_librdkafka_broker_outbuf_messages", labels, float(outbuf)
    for topic, info in (statistics.get("topics") or {}).items():
        if not isinstance(info, Mapping):
            continue
        for partition, part in (info.get("partitions") or {}).items():
            if not isinstance(part, Mapping) or str(partition) == "-1":
                continue
            fetchq = part.get("fetchq_cnt")
            if isinstance(fetchq, int | float) and part.get("fetch_state") not in (None, "none"):
                yield (
                    "conveyor_librdkafka_fetch_queue_messages",
                    {"client": name, "topic": str(topic), "partition": str(partition)},
                    float(fetchq),
                )
