"""Liveness against the real broker: `conveyor server --liveness-port` answers /healthz with
200 while it consumes, and with 500 and the reason once a consumer hangs past its limit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from conveyor import App, ConfigurationError, Producer
from helpers import free_port

HERE = Path(__file__).parent


def healthz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def until(check: Callable[[], bool], timeout: float) -> bool:
    """Ask another process again after short pauses until ``check()`` holds (bounded)."""
    pause = threading.Event()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except OSError:
            pass
        pause.wait(0.2)
    return False


def test_healthz_turns_500_when_a_consumer_hangs(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    port = free_port()
    env = dict(os.environ, TOPIC=topic, GROUP=f"g-{uuid.uuid4().hex[:8]}",
               KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap, CONSUMING_TTL="1", HANG="30")  # fmt: skip
    env["PYTHONPATH"] = str(HERE) + os.pathsep + env.get("PYTHONPATH", "")
    server = subprocess.Popen(
        [sys.executable, "-m", "conveyor", "server", "--app", "liveness_app:app",
         "--liveness-port", str(port), "--log-level", "WARNING"],
        cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            producer.produce_sync(topic=topic, payload=b"fine")
            assert until(lambda: healthz(port) == (200, "ok\n"), 60), "healthy while consuming"
            producer.produce_sync(topic=topic, payload=b"hang")
        assert until(lambda: healthz(port)[0] == 500, 30)
        status, reasons = healthz(port)
        assert status == 500
        assert f"a batch of {topic}/0" in reasons
        assert "limit 1 s" in reasons
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait(30)


def test_liveness_in_process_and_bad_settings() -> None:
    app = App(kafka={"bootstrap.servers": "127.0.0.1:1", "max.poll.interval.ms": 60_000})
    assert app.liveness.polling_ttl == 60.0
    health = app.liveness.check()
    assert not health.ok
    assert health.reasons == ("the app is idle",)
    with pytest.raises(ConfigurationError) as refused:
        app.liveness.configure(consuming_ttl=0)
    assert refused.value.setting == "consuming_ttl"
