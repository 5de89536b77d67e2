"""`conveyor server --metrics-port` serves the running app's metrics over HTTP."""

from __future__ import annotations

import os
import re
import threading
import urllib.request
import uuid
from pathlib import Path

from conveyor import Producer
from helpers import ServerProcess, conveyor_argv

APPS = Path(__file__).parents[1] / "processing"  # reporting_app.py: prints a line per batch


def test_conveyor_server_serves_metrics_of_what_it_consumed(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic(partitions=2)
    group = f"server-metrics-{uuid.uuid4().hex[:6]}"
    env = dict(os.environ, TOPIC=topic, GROUP=group, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap)
    env["PYTHONPATH"] = str(APPS) + os.pathsep + env.get("PYTHONPATH", "")
    argv = conveyor_argv(
        "server", "--app", "reporting_app:app", "--metrics-port", "0", "--log-level", "WARNING"
    )
    server = ServerProcess(argv, env=env, cwd=APPS, read=("stdout", "stderr"))
    try:
        assert server.wait_for(lambda lines: any("/metrics" in line for line in lines), 60), (
            server.lines
        )
        banner = next(line for line in server.lines if "/metrics" in line)
        url = re.search(r"http://[\d.]+:\d+/metrics", banner)
        assert url is not None, banner
        assert server.wait_for(lambda lines: any(line.startswith("assigned") for line in lines))
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            producer.produce_many_sync(
                [{"topic": topic, "payload": b"m", "key": str(n)} for n in range(30)]
            )

        def consumed() -> int:
            done = {line for line in server.lines if line.startswith("batch ")}
            return sum(int(line.split()[3]) - int(line.split()[2]) + 1 for line in done)

        assert server.wait_for(lambda _lines: consumed() >= 30)

        def scrape() -> tuple[float, str]:
            with urllib.request.urlopen(url.group(0), timeout=10) as response:
                text = response.read().decode()
            counted = [
                float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith("messaging_client_consumed_messages_total{")
                and f'"{topic}"' in line
            ]
            return sum(counted), text

        # consume() prints its batch before it returns, and the counter counts a batch when it
        # has returned: the last batch may be printed and not counted yet (a remote counter,
        # scraped again until it shows all 30, for 10 s at most)
        pause = threading.Event()
        for _ in range(50):
            total, text = scrape()
            if total >= 30:
                break
            pause.wait(0.2)
        assert total == 30, text
        assert f'conveyor_consumer_lag_messages{{consumer_group="{group}"' in text
    finally:
        code = server.stop()
    assert code == 0, server.lines
