"""A FastAPI service that runs a Conveyor app in its lifespan and produces from its handlers.

    conveyor broker start
    uvicorn --app-dir examples/asgi fastapi_app:web              # or add --loop uvloop
    curl -X POST localhost:8000/orders -H 'content-type: application/json' -d '{"id": 1}'

``POST /orders`` awaits the order's delivery (the broker acknowledged it) and answers with
its partition and offset; the app's async consumer ships each order. ``GET /health`` is the
app's state. Stopping the server (Ctrl-C, SIGTERM) stops the app gracefully: running batches
finish and their offsets are committed before the process exits.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI
from pydantic import BaseModel

from shop import ORDERS, build_app

app = build_app("asgi-fastapi")


@contextlib.asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    app.start()  # returns at once; the app consumes on its own threads
    try:
        yield
    finally:
        await asyncio.to_thread(app.stop_and_wait)  # blocks: off the server's loop
        print(f"conveyor app {app.state}", flush=True)


web = FastAPI(lifespan=lifespan)


class Order(BaseModel):
    id: int


@web.post("/orders")
async def place_order(order: Order) -> dict[str, object]:
    report = await app.producer.produce_async(
        topic=ORDERS, key=str(order.id), payload=order.model_dump()
    )
    return {"partition": report.partition, "offset": report.offset}


@web.get("/health")
async def health() -> dict[str, object]:
    loop = type(asyncio.get_running_loop())
    return {"state": app.state, "loop": f"{loop.__module__}.{loop.__qualname__}"}
