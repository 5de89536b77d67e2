"""The ASGI examples under a real server: uvicorn runs each (FastAPI, Starlette; asyncio's loop
and uvloop), a real HTTP client places orders, the handlers await their delivery, the app's
async consumer ships them, and SIGTERM stops the app gracefully with every offset committed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from conveyor import Admin
from helpers import free_port

EXAMPLES = Path(__file__).parents[3] / "examples" / "asgi"
ORDERS = 20


def _wait_until_running(base: str, server: subprocess.Popen[bytes], log: Path) -> dict[str, str]:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert server.poll() is None, log.read_text()[-3000:]
        try:
            health = httpx.get(f"{base}/health", timeout=2).json()
        except httpx.TransportError:
            health = None
        if health is not None and health["state"] == "running":
            return dict(health)
        time.sleep(0.2)  # a server starting: nothing to wait on but its port
    raise AssertionError(f"the server did not start: {log.read_text()[-3000:]}")


async def _place_orders(base: str) -> list[dict[str, int]]:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        responses = await asyncio.gather(
            *(client.post("/orders", json={"id": number}) for number in range(ORDERS))
        )
    for response in responses:
        assert response.status_code == 200, response.text
    return [response.json() for response in responses]


@pytest.mark.parametrize(
    ("module", "loop"),
    [("fastapi_app", "asyncio"), ("fastapi_app", "uvloop"), ("starlette_app", "uvloop")],
)
def test_a_web_server_runs_the_app_in_its_lifespan_and_produces_from_its_handlers(
    module: str,
    loop: str,
    kafka_bootstrap: str,
    kafka_admin: Admin,
    new_topic: Callable[..., str],
    read_messages: Callable[..., list[Any]],
    tmp_path: Path,
) -> None:
    orders, shipments = new_topic(partitions=2), new_topic()
    group = f"asgi-{uuid.uuid4().hex[:8]}"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    env = {
        **os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "ASGI_ORDERS_TOPIC": orders,
        "ASGI_SHIPMENTS_TOPIC": shipments, "ASGI_GROUP": group,
    }  # fmt: skip
    with log.open("wb") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", str(EXAMPLES), f"{module}:web",
             "--host", "127.0.0.1", "--port", str(port), "--loop", loop],
            stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
        )  # fmt: skip
    try:
        health = _wait_until_running(base, server, log)
        assert health["loop"] == (
            "uvloop.Loop" if loop == "uvloop" else "asyncio.unix_events._UnixSelectorEventLoop"
        )

        placed = asyncio.run(_place_orders(base))
        # each answer is its own delivery report: twenty distinct offsets over both partitions
        assert len({(report["partition"], report["offset"]) for report in placed}) == ORDERS

        shipped = [json.loads(message.value()) for message in read_messages(shipments, ORDERS, 60)]
        assert sorted(shipment["order"] for shipment in shipped) == list(range(ORDERS))
        assert all(shipment["shipped"] for shipment in shipped)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            returncode = server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            raise
    output_text = log.read_text()
    # uvicorn finishes the lifespan, then raises the signal it caught again (exit -SIGTERM)
    assert returncode in (0, -signal.SIGTERM), output_text[-3000:]
    assert "conveyor app stopped" in output_text, output_text[-3000:]
    assert "Application shutdown complete." in output_text, output_text[-3000:]
    # the lifespan's graceful stop committed what the consumer shipped, on both partitions
    committed = {lag.partition: lag.committed for lag in kafka_admin.read_lags([group])}
    placed_per_partition = {
        partition: sum(1 for report in placed if report["partition"] == partition)
        for partition in (0, 1)
    }
    assert committed == placed_per_partition


UVLOOP_APP = """
import asyncio, sys, threading
import uvloop
from conveyor import App, Consumer

uvloop.install()  # before the app starts: its own loop (the async lanes') follows the policy
topic, bootstrap = sys.argv[1], sys.argv[2]
loops, consumed = [], threading.Event()

class Records(Consumer):
    async def consume(self):
        loops.append(type(asyncio.get_running_loop()).__module__)
        await self.produce_async(topic=topic + "-echo", payload=self.messages.last.payload)
        consumed.set()

app = App(client_id="uvloop-app", kafka={"bootstrap.servers": bootstrap, "group.id": topic})
app.routes.topic(topic, Records)
app.start()
app.producer.produce_sync(topic=topic, payload={"n": 1})
print(consumed.wait(60), loops[:1], flush=True)
app.stop_and_wait()
"""


def test_with_uvloop_installed_the_apps_own_loop_is_uvloop(
    kafka_bootstrap: str, kafka_admin: Admin, new_topic: Callable[..., str]
) -> None:
    topic = new_topic()
    kafka_admin.create_topic(f"{topic}-echo", 1)
    try:
        done = subprocess.run(
            [sys.executable, "-c", UVLOOP_APP, topic, kafka_bootstrap],
            capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    finally:
        kafka_admin.delete_topic(f"{topic}-echo")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "True ['uvloop']", done.stdout
