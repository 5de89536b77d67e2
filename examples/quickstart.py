"""Conveyor's example app, run by `make run`: a small shop where orders become payments.

It creates the shop's topics, produces 100,000 orders with Conveyor's producer, runs the
shop app (examples/shop/app.py: two topics, two consumers, the first producing to the
second) until every payment of this run was consumed, and prints a table.

    python examples/quickstart.py [--orders N]
    cd examples && conveyor server --app shop.app:app      # the same app, as a server
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))

from conveyor import Producer
from conveyor.admin import migrate
from shop.app import ORDERS, PAYMENTS, app, ledger


def ensure_topics() -> None:
    """Create the routes' topics if missing, as `conveyor topics migrate` does."""
    for change in migrate(app.admin, app.routes):
        if change.error:
            raise SystemExit(f"could not set up {change.topic}: {change.error}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--orders", type=int, default=100_000)
    args = parser.parse_args()
    bootstrap = str(app.settings.kafka["bootstrap.servers"])
    console = Console()
    run = uuid.uuid4().hex[:8]
    ensure_topics()

    app.start()
    try:
        started = time.perf_counter()
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            bursts = []
            for first in range(0, args.orders, 1_000):
                orders = [
                    {"topic": ORDERS, "key": f"customer-{index % 100}",
                     "payload": {"run": run, "order": index, "item": "widget", "quantity": index % 7 + 1}}
                    for index in range(first, min(first + 1_000, args.orders))
                ]  # fmt: skip
                bursts.append(producer.produce_many_async(orders))
            for burst in bursts:
                burst.wait(60)
        produced = time.perf_counter() - started
        if not ledger.wait_for(run, args.orders, timeout=300):
            console.print(
                f"[red]only {ledger.payments.get(run, 0):,} of {args.orders:,} payments arrived[/]"
            )
            sys.exit(1)
        finished = time.perf_counter() - started
    finally:
        app.stop_and_wait()

    table = Table(title=f"Conveyor shop — run {run} on {bootstrap}", title_justify="left")
    table.add_column("step")
    table.add_column("messages", justify="right")
    table.add_column("seconds", justify="right")
    table.add_column("messages/s", justify="right")
    table.add_row(
        f"produce orders to {ORDERS} (acks=all, idempotent)",
        f"{args.orders:,}",
        f"{produced:.2f}",
        f"{args.orders / produced:,.0f}",
    )
    table.add_row(
        f"orders -> payments ({PAYMENTS}) -> totals, end to end",
        f"{args.orders:,}",
        f"{finished:.2f}",
        f"{args.orders / finished:,.0f}",
    )
    console.print(table)
    console.print(f"total charged: {ledger.amounts[run]:,.2f}")


if __name__ == "__main__":
    main()
