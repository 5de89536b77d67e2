"""Web UI reporting's cost on the consumer path: the same no-op consumer with and without
``app.web.enable()`` (reporting every second, 5x the default, to make any cost show), beside
the bare confluent-kafka batch loop, each variant on its own topic filled the same way
(4 partitions). Also prints what reporting costs Kafka: reports/s and bytes per report.
Target: reporting on >= 0.95x of reporting off (nothing measurable).
"""

from __future__ import annotations

import uuid

from baselines import bare_batch_consume, fill_topic
from conveyor import App, Consumer
from conveyor.admin import migrate
from conveyor.web import WebTopics
from harness import Bench, Figure, RateMeter

LIKE_FOR_LIKE = {"fetch.queue.backoff.ms": 10}  # what Conveyor's listener sets


def conveyor_consume(
    bootstrap: str, topic: str, count: int, web: WebTopics | None
) -> tuple[float, int, int]:
    """msgs/s, reports sent, bytes of reports."""
    meter = RateMeter(count)

    class Counting(Consumer):
        def consume(self) -> None:
            meter.add(len(self.messages))

    app = App(
        client_id="bench",
        kafka={"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
               "auto.offset.reset": "earliest"},
        concurrency=4, max_messages=500, max_wait_time=0.5,
    )  # fmt: skip
    app.routes.topic(topic, Counting)
    if web is not None:
        app.web.enable(tracking_interval=1.0, topics=web, aggregate=False)
    app.start()
    try:
        if not meter.done.wait(180):
            raise RuntimeError(f"Conveyor consumed {meter.seen} of {count}")
    finally:
        app.stop_and_wait()
    tracker = app.web.tracker
    return (
        meter.rate(),
        tracker.reports_sent if tracker else 0,
        tracker.report_bytes if tracker else 0,
    )


def main() -> None:
    bench = Bench(
        "web_reporting",
        __doc__ or "",
        lambda parser: parser.add_argument("--messages", type=int, default=1_000_000),
    )
    count: int = bench.args.messages
    payload = b'{"order":12345,"customer":"c-0042","total":99.5}'.ljust(100)
    web = WebTopics.prefixed(f"bench-{uuid.uuid4().hex[:6]}")
    for change in migrate(bench._admin, web.declared()):
        if change.error:
            raise RuntimeError(change.error)
    try:
        topics = {}
        for variant in ("bare", "off", "on"):
            topics[variant] = bench.create_topic(partitions=4)
            fill_topic(bench.bootstrap, topics[variant], count, payload, partitions=4)
        bare: list[float] = []
        off: list[float] = []
        on: list[float] = []
        reports = sizes = 0
        for attempt in range(1, bench.repeats + 1):
            bare.append(
                bare_batch_consume(bench.bootstrap, topics["bare"], count, config=LIKE_FOR_LIKE)
            )
            off.append(conveyor_consume(bench.bootstrap, topics["off"], count, None)[0])
            rate, sent, sent_bytes = conveyor_consume(bench.bootstrap, topics["on"], count, web)
            on.append(rate)
            reports, sizes = reports + sent, sizes + sent_bytes
            bench.console.print(
                f"  run {attempt}/{bench.repeats}: bare {bare[-1]:,.0f}, reporting off {off[-1]:,.0f}, "
                f"reporting on {on[-1]:,.0f} msgs/s ({sent} reports, {sent_bytes / max(sent, 1):,.0f} B each)"
            )
        note = f"{count:,} x 100 B, 4 partitions"
        bench.record(
            Figure(bench.name, "no-op consumer, reporting off (baseline)", "msgs/s", off, note=note)
        )
        bench.record(
            Figure(
                bench.name,
                "no-op consumer, reporting on every 1 s (target >= 0.95x)",
                "msgs/s",
                on,
                off,
                note=note,
            )
        )
        bench.record(Figure(bench.name, "no-op consumer, reporting on, vs the bare loop", "msgs/s", on, bare,
                            note="the bare loop with fetch.queue.backoff.ms=10, as Conveyor sets it"))  # fmt: skip
        bench.console.print(
            f"reporting cost: 1 report per process per tracking_interval (0.2 msgs/s at the default 5 s), "
            f"{sizes / max(reports, 1):,.0f} B per report here (4 partitions, 1 listener)"
        )
    finally:
        for name in web.names:
            bench._admin.delete_topic(name)
    bench.report()


if __name__ == "__main__":
    main()
