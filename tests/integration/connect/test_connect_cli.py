"""``conveyor connect list`` and ``conveyor connect broadcast`` as a user runs them."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import websockets

from conveyor import Producer
from helpers import free_port

HERE = Path(__file__).parent


def environment(topic: str, bootstrap: str) -> dict[str, str]:
    env = dict(os.environ, TOPIC=topic, KAFKA_BOOTSTRAP_SERVERS=bootstrap)
    env["PYTHONPATH"] = str(HERE) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_connect_list_shows_the_sinks_as_a_table(kafka_bootstrap: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "conveyor", "connect", "list", "--app", "broadcast_app:app"],
        capture_output=True, text=True, timeout=60, env=environment("news", kafka_bootstrap),
        cwd=HERE, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Broadcast" in result.stdout
    assert "Webhook" in result.stdout
    assert "news-hooks" in result.stdout


def test_connect_broadcast_serves_websocket_clients_until_sigterm(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic(partitions=1)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "conveyor", "connect", "broadcast", "--app", "broadcast_app:app",
         "--port", str(port), "--log-level", "WARNING"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=environment(topic, kafka_bootstrap), cwd=HERE,
    )  # fmt: skip
    try:

        async def client() -> list[dict[str, object]]:
            deadline = time.monotonic() + 60
            while True:  # the process needs a moment to listen: retry the connection
                try:
                    socket_ = await websockets.connect(f"ws://127.0.0.1:{port}/ws")
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)
            async with socket_:
                await socket_.send(json.dumps({"subscribe": ["k1"]}))
                assert json.loads(await socket_.recv()) == {"subscribed": ["k1"]}
                with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
                    producer.produce_many_sync(
                        [
                            {"topic": topic, "key": f"k{n % 2}", "payload": {"n": n}}
                            for n in range(10)
                        ]
                    )
                return [json.loads(await socket_.recv()) for _ in range(5)]

        received = asyncio.run(asyncio.wait_for(client(), 90))
        assert [m["payload"]["n"] for m in received] == [1, 3, 5, 7, 9]  # type: ignore[index]
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        _, errors = process.communicate(timeout=30)
        print(errors)  # shown when the test failed
