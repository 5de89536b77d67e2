"""Tracing example: producer → consumer → pipe → consumer, one trace per order.

An order is produced under a ``checkout`` span; ``Orders`` checks it and pipes it to the
shipments topic; ``Shipments`` ships it. Every hop is a span of the same trace (``send
orders``, ``process orders``, ``send shipments``, ``process shipments``), carried between
them in the messages' ``traceparent`` headers. Spans go to the console by default, to an
OTLP endpoint when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (with
``pip install opentelemetry-exporter-otlp-proto-http``). Per-stage latency and Prometheus
metrics are on too, and printed at the end.

    python examples/tracing/app.py [--orders 3] [--metrics-port 9464]
"""

from __future__ import annotations

import argparse
import os
import threading

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from rich.console import Console
from rich.table import Table

from conveyor import App, Consumer
from conveyor.admin import migrate
from conveyor.tracing import STAGES

ORDERS, SHIPMENTS = "tracing_example_orders", "tracing_example_shipments"
console = Console(stderr=True)


def exporter() -> tuple[SpanExporter, str]:
    """OTLP over HTTP when an endpoint is configured, else the console."""
    if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return ConsoleSpanExporter(), "the console"
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter,
        )
    except ImportError:
        raise SystemExit(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OTLP exporter is not installed: "
            "pip install opentelemetry-exporter-otlp-proto-http"
        ) from None
    return OTLPSpanExporter(), os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"]


def build(bootstrap: str, shipped: threading.Semaphore) -> App:
    app = App(
        client_id="tracing-example",
        kafka={
            "bootstrap.servers": bootstrap,
            "group.id": "tracing-example",
        },
        max_wait_time=0.05,
    )

    class Orders(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                with app.tracing.message_span(message, "check order"):
                    self.pipe_sync(topic=SHIPMENTS, message=message)

    class Shipments(Consumer):
        def consume(self) -> None:
            for message in self.messages:
                with app.tracing.message_span(message, "ship order"):
                    console.print(f"shipped order {message.payload['id']}")
                shipped.release()

    app.routes.topic(ORDERS, Orders)  # from the group's committed offsets (earliest at first)
    app.routes.topic(SHIPMENTS, Shipments)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=3)
    parser.add_argument("--metrics-port", type=int, default=None)
    parser.add_argument(
        "--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    )
    args = parser.parse_args()

    span_exporter, where = exporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "tracing-example"}))
    processor = (
        SimpleSpanProcessor
        if isinstance(span_exporter, ConsoleSpanExporter)
        else BatchSpanProcessor
    )
    provider.add_span_processor(processor(span_exporter))
    trace.set_tracer_provider(provider)

    shipped = threading.Semaphore(0)
    app = build(args.bootstrap, shipped)
    for change in migrate(app.admin, app.routes):
        if change.error:
            raise SystemExit(f"could not set up {change.topic}: {change.error}")
    app.tracing.enable()  # the global provider set above
    app.latency.enable()
    if args.metrics_port is not None:
        port = app.metrics.serve(args.metrics_port)
        console.print(f"metrics on http://127.0.0.1:{port}/metrics")
    else:
        app.metrics.enable()
    assigned = threading.Event()
    app.monitor.subscribe("rebalance.partitions_assigned", lambda _event: assigned.set())
    console.print(f"spans go to {where}")
    app.start()
    try:
        if not assigned.wait(30):
            raise SystemExit("the app got no partitions within 30 s")
        tracer = trace.get_tracer("tracing-example")
        for number in range(1, args.orders + 1):
            with tracer.start_as_current_span("checkout"):
                app.producer.produce_sync(
                    topic=ORDERS, payload={"id": number}, key=f"customer-{number}"
                )
        for _ in range(args.orders):
            if not shipped.acquire(timeout=60):
                raise SystemExit("an order was not shipped within 60 s")
    finally:
        app.stop_and_wait()
        provider.shutdown()
    table = Table(title="where the time went (ms, p50 / p99)")
    table.add_column("stage")
    for topic in (ORDERS, SHIPMENTS):
        table.add_column(topic, justify="right")
    snapshot = app.latency.snapshot()
    for stage in STAGES:
        cells = []
        for topic in (ORDERS, SHIPMENTS):
            summary = snapshot.get(topic, {}).get(stage)
            cells.append(
                "-" if summary is None else f"{summary.p50 * 1000:.2f} / {summary.p99 * 1000:.2f}"
            )
        table.add_row(stage, *cells)
    console.print(table)
    console.print(f"shipped {args.orders} order(s), one trace each")


if __name__ == "__main__":
    main()
