"""A Starlette service that runs a Conveyor app in its lifespan and produces from its handlers.

    conveyor broker start
    uvicorn --app-dir examples/asgi starlette_app:web            # or add --loop uvloop
    curl -X POST localhost:8000/orders -d '{"id": 1}'

The same service as ``fastapi_app.py`` without FastAPI: ``POST /orders`` awaits the order's
delivery and answers with its partition and offset; ``GET /health`` is the app's state.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from shop import ORDERS, build_app

app = build_app("asgi-starlette")


@contextlib.asynccontextmanager
async def lifespan(_: Starlette) -> AsyncIterator[None]:
    app.start()
    try:
        yield
    finally:
        await asyncio.to_thread(app.stop_and_wait)
        print(f"conveyor app {app.state}", flush=True)


async def place_order(request: Request) -> JSONResponse:
    order = await request.json()
    if not isinstance(order, dict) or not isinstance(order.get("id"), int):
        return JSONResponse({"error": 'an order is {"id": <integer>}'}, status_code=422)
    report = await app.producer.produce_async(
        topic=ORDERS, key=str(order["id"]), payload={"id": order["id"]}
    )
    return JSONResponse({"partition": report.partition, "offset": report.offset})


async def health(_: Request) -> JSONResponse:
    loop = type(asyncio.get_running_loop())
    return JSONResponse({"state": app.state, "loop": f"{loop.__module__}.{loop.__qualname__}"})


web = Starlette(
    routes=[Route("/orders", place_order, methods=["POST"]), Route("/health", health)],
    lifespan=lifespan,
)
