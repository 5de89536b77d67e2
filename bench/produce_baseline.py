"""The bare produce loop that the producer benchmarks compare against.

Figures: a bare confluent-kafka produce loop with one producer-wide delivery
callback (the baseline), and the same loop with a small handle object per message
(what a naive "future per message" costs).
"""

from __future__ import annotations

from baselines import bare_produce
from harness import Bench


def main() -> None:
    bench = Bench(
        "produce_baseline",
        __doc__ or "",
        lambda parser: parser.add_argument("--messages", type=int, default=1_000_000),
    )
    count: int = bench.args.messages
    payload = b"x" * 100
    topic = bench.create_topic(partitions=1)
    bench.measure(
        "bare produce, one producer-wide callback",
        lambda: bare_produce(bench.bootstrap, topic, count, payload),
        unit="msgs/s",
        note=f"{count:,} x 100 B",
    )
    bench.compare(
        "bare produce, a handle per message",
        candidate=lambda: bare_produce(
            bench.bootstrap, topic, count, payload, per_message_handle=True
        ),
        baseline=lambda: bare_produce(bench.bootstrap, topic, count, payload),
        unit="msgs/s",
        note="ratio against the producer-wide callback",
    )
    bench.report()


if __name__ == "__main__":
    main()
