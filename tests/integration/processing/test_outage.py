"""A broker that stops for a while under a running `conveyor server`: the log says so in a
handful of lines (lost, back), not one per failed reconnect; consumption resumes after it and
nothing is lost."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from conveyor import Admin, Producer
from conveyor.broker import DevelopmentBroker
from helpers import ServerProcess, conveyor_argv

pytestmark = pytest.mark.xdist_group("brokers")  # xdist: see tests/conftest.py

HERE = Path(__file__).parent
OUTAGE = 12.0  # seconds without a broker (librdkafka retries a connection ~every 100 ms-10 s)


def test_a_broker_outage_is_a_few_log_lines(
    own_broker: DevelopmentBroker, own_bootstrap: str, tmp_path: Path
) -> None:
    bootstrap = own_bootstrap
    topic = f"outage-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topic(topic, partitions=1)
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_many_sync([{"topic": topic, "payload": b"%d" % n} for n in range(10)])

    stderr_path = tmp_path / "server.log"
    env = dict(os.environ, TOPIC=topic, GROUP=f"outage-{uuid.uuid4().hex[:6]}",
               KAFKA_BOOTSTRAP_SERVERS=bootstrap, SLOW="0")  # fmt: skip
    env["PYTHONPATH"] = str(HERE) + os.pathsep + env.get("PYTHONPATH", "")
    argv = conveyor_argv("server", "--app", "reporting_app:app", "--log-level", "INFO")
    with stderr_path.open("w") as stderr:
        server = ServerProcess(argv, env=env, cwd=HERE, stderr=stderr)

    def seen(offset: int) -> bool:
        return server.wait_for(
            lambda lines: any(
                line.startswith("batch ") and int(line.split()[3]) >= offset for line in lines
            ),
            timeout=90,
        )

    try:
        assert seen(9), "the server consumed what was there:\n" + tail(stderr_path)
        own_broker.stop()
        time.sleep(OUTAGE)  # the outage itself: a broker that stays away this long
        own_broker.start()
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            producer.produce_many_sync(
                [{"topic": topic, "payload": b"%d" % n} for n in range(10, 20)]
            )
        assert seen(19), "consumption resumed after the outage:\n" + tail(stderr_path)
    finally:
        code = server.stop()
    assert code == 0
    log = stderr_path.read_text().splitlines()
    loud = [line for line in log if " WARNING " in line or " ERROR " in line]
    assert any("lost the connection to Kafka" in line for line in loud), log
    assert any("the connection to Kafka is back" in line for line in log), log
    assert len(loud) <= 6, "a handful of lines, not one per reconnect:\n" + "\n".join(loud)
    # The "lost the connection" line quotes the first error, and a reminder every 30 s the
    # last (a broker slow to start again, under load, keeps it away that long); the raw lines
    # themselves stay at DEBUG.
    ours = ("lost the connection", "still no connection")
    raw = [line for line in loud if "Connect to ipv4" in line and not any(w in line for w in ours)]
    assert not raw, "raw reconnect lines stay at DEBUG:\n" + "\n".join(raw)


def tail(log: Path, lines: int = 60) -> str:
    """The end of the server's log, for a failure to show what the server went through."""
    return "\n".join(log.read_text().splitlines()[-lines:])
