"""Conveyor's example app, run by `make run`: a small shop where orders become payments.

It creates the shop's topics (and the web UI's), starts the web UI, produces 100,000 orders
with Conveyor's producer (every 1,000th a large one, and one malformed), runs the shop app
(examples/shop/app.py: orders become payments; large payments get background jobs; the
malformed order goes to a dead letter queue; a recurring task reports the sales) until every
payment of this run was consumed, and prints a table. Then the app and its web UI keep
running until Ctrl-C (``--exit`` leaves at once).

    python examples/quickstart.py [--orders N] [--web-port 9000] [--exit]
    cd examples && conveyor server --app shop.app:app      # the same app, as a server
    cd examples && conveyor web --app shop.app:app         # and its web UI
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))
# The shop reads its brokers from the environment; make run's are the development broker's.
os.environ.setdefault("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")

from conveyor import Producer
from conveyor.admin import migrate
from shop.app import ORDERS, ORDERS_DLQ, PAYMENTS, Order, app, ledger


def ensure_topics() -> None:
    """Create the routes' topics (the job queues', the schedules' and the dead letter queue's
    among them) and the web UI's if missing, as `conveyor topics migrate` and `conveyor web
    install` do."""
    for change in [*migrate(app.admin, app.routes), *migrate(app.admin, app.web.topics.declared())]:
        if change.error:
            raise SystemExit(f"could not set up {change.topic}: {change.error}")


def order(run: str, index: int) -> Order:
    """Order ``index`` of ``run``: 1 to 7 widgets, every 1,000th 100 (a large payment)."""
    quantity = 100 if index % 1_000 == 999 else index % 7 + 1
    return Order(run=run, order=index, quantity=quantity)


def start_web_ui(port: int) -> tuple[object, threading.Thread]:
    """Serve the app's web UI on 127.0.0.1:port from a thread (uvicorn)."""
    import uvicorn  # noqa: PLC0415 - installed with conveyor[web]

    server = uvicorn.Server(
        uvicorn.Config(app.web.asgi(), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="web-ui", daemon=True)
    thread.start()
    return server, thread


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--orders", type=int, default=100_000)
    parser.add_argument("--web-port", type=int, default=9000)
    parser.add_argument("--exit", action="store_true", help="stop after the run")
    args = parser.parse_args()
    bootstrap = str(app.settings.kafka["bootstrap.servers"])
    console = Console()
    run = uuid.uuid4().hex[:8]
    count = args.orders
    ensure_topics()
    web, web_thread = start_web_ui(args.web_port)
    console.print(f"Web UI: [bold]http://127.0.0.1:{args.web_port}/[/]")

    dead_letters = threading.Semaphore(0)  # released for each order sent to the DLQ
    app.monitor.subscribe("dead_letter_queue.dispatched", lambda event: dead_letters.release())
    app.start()
    console.print(f"Producing {count:,} orders and a malformed one (its error is logged below; "
                  f"it goes to the dead letter queue {ORDERS_DLQ})")  # fmt: skip
    try:
        started = time.perf_counter()
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            # A poison message: a quantity the Order model refuses (not a whole number).
            producer.produce_sync(topic=ORDERS, key="customer-0",
                                  payload={"run": run, "order": count, "quantity": "a dozen"})  # fmt: skip
            bursts = []
            for first in range(0, count, 1_000):
                burst = [
                    {"topic": ORDERS, "key": f"customer-{index % 100}", "payload": order(run, index)}
                    for index in range(first, min(first + 1_000, count))
                ]  # fmt: skip
                bursts.append(producer.produce_many_async(burst))
            for handle in bursts:
                handle.wait(60)
        produced = time.perf_counter() - started
        if not ledger.wait_for(run, count, timeout=300):
            console.print(
                f"[red]only {ledger.payments.get(run, 0):,} of {count:,} payments arrived[/]"
            )
            sys.exit(1)
        finished = time.perf_counter() - started
        print_results(console, run, bootstrap, count, produced, finished)
        print_tour(console, args.web_port, bootstrap, count, dead_letters.acquire(timeout=30))
        if not args.exit:
            console.print(
                f"The shop keeps running; its web UI is at http://127.0.0.1:{args.web_port}/ "
                "(Ctrl-C stops both)."
            )
            try:
                threading.Event().wait()
            except KeyboardInterrupt:
                console.print("stopping")
    finally:
        app.stop_and_wait()
        web.should_exit = True  # type: ignore[attr-defined]
        web_thread.join(10)


def print_results(
    console: Console, run: str, bootstrap: str, orders: int, produced: float, finished: float
) -> None:
    table = Table(title=f"Conveyor shop — run {run} on {bootstrap}", title_justify="left")
    table.add_column("step")
    table.add_column("messages", justify="right")
    table.add_column("seconds", justify="right")
    table.add_column("messages/s", justify="right")
    table.add_row(
        f"produce orders to {ORDERS} (acks=all, idempotent)",
        f"{orders:,}",
        f"{produced:.2f}",
        f"{orders / produced:,.0f}",
    )
    table.add_row(
        f"orders -> payments ({PAYMENTS}) -> totals, end to end",
        f"{orders:,}",
        f"{finished:.2f}",
        f"{orders / finished:,.0f}",
    )
    console.print(table)
    console.print(f"total charged: {ledger.amounts[run]:,.2f}")


def print_tour(console: Console, port: int, bootstrap: str, orders: int, dead_letter: bool) -> None:
    """What this run left on the web UI's pages, and how to send the malformed order back."""
    web = f"http://127.0.0.1:{port}"
    console.print(f"{orders // 1_000:,} large payments: a receipt job each now ({web}/background-jobs); "
                  f"a review request a day later, and the sales report each minute ({web}/schedules)")  # fmt: skip
    if not dead_letter:
        console.print(f"[red]the malformed order did not reach {ORDERS_DLQ}[/]")
        return
    console.print(f"The malformed order is in the dead letter queue, with its error: "
                  f"{web}/dlq/{ORDERS_DLQ}. Send it back (the model refuses it again):")  # fmt: skip
    replay = f"conveyor dlq replay --app shop.app:app --topic {ORDERS_DLQ}"
    console.print(f"  cd examples && KAFKA_BOOTSTRAP_SERVERS={bootstrap} {replay}", soft_wrap=True)


if __name__ == "__main__":
    main()
