"""The Conveyor side of the ASGI examples: an app whose async consumer ships orders.

Both web examples (``fastapi_app.py``, ``starlette_app.py``) run this app in their server's
lifespan and produce orders from their request handlers by awaiting the delivery.
"""

from __future__ import annotations

import os

from conveyor import App, Consumer

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
ORDERS = os.environ.get("ASGI_ORDERS_TOPIC", "asgi_orders")
SHIPMENTS = os.environ.get("ASGI_SHIPMENTS_TOPIC", "asgi_shipments")
GROUP = os.environ.get("ASGI_GROUP", "asgi-shop")


class ShipOrders(Consumer):
    """For each order, a shipment, produced by awaiting its delivery (the loop runs the
    partition's other lanes and the other partitions meanwhile)."""

    async def consume(self) -> None:
        for message in self.messages:
            order = message.payload
            await self.producer.produce_async(
                topic=SHIPMENTS, key=message.key, payload={"order": order["id"], "shipped": True}
            )


def build_app(client_id: str) -> App:
    """The app a web server runs in its lifespan (one consumer group member per worker)."""
    app = App(client_id=client_id, kafka={"bootstrap.servers": BOOTSTRAP}, shutdown_timeout=30)
    with app.routes.consumer_group(GROUP):
        app.routes.topic(ORDERS, ShipOrders)
    return app
