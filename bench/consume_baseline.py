"""The bare consume loops that the consumer benchmarks compare against.

Figures: a bare confluent-kafka batch-consume loop (``consume(num_messages=500)``,
the baseline) and a per-message ``poll()`` loop, over one partition of 100-byte messages.
"""

from __future__ import annotations

from baselines import bare_batch_consume, bare_poll_consume, fill_topic
from harness import Bench


def main() -> None:
    bench = Bench(
        "consume_baseline",
        __doc__ or "",
        lambda parser: parser.add_argument("--messages", type=int, default=1_000_000),
    )
    count: int = bench.args.messages
    topic = bench.create_topic(partitions=1)
    bench.console.print(f"filling {topic} with {count:,} messages")
    fill_topic(bench.bootstrap, topic, count, b"x" * 100)
    bench.measure(
        "bare batch consume (500 per call)",
        lambda: bare_batch_consume(bench.bootstrap, topic, count),
        unit="msgs/s",
        note=f"{count:,} x 100 B, 1 partition",
    )
    bench.compare(
        "bare per-message poll",
        candidate=lambda: bare_poll_consume(bench.bootstrap, topic, count),
        baseline=lambda: bare_batch_consume(bench.bootstrap, topic, count),
        unit="msgs/s",
        note="ratio against the batch loop",
    )
    bench.report()


if __name__ == "__main__":
    main()
