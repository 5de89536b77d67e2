"""What `conveyor server` logs at INFO: the start, the assignment, the stop — not a line per
batch — and with `$CONVEYOR_LOG_FORMAT=json` one JSON object a line on stderr, with the
process, group, topic and partitions of each line that is about them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from pathlib import Path

from conveyor import Producer
from helpers import ServerProcess, conveyor_argv

HERE = Path(__file__).parent
MESSAGES = 40


def test_info_lines_are_an_operators_and_json_lines_carry_their_fields(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic(partitions=2)
    group = f"logs-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, TOPIC=topic, GROUP=group, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap,
               CONVEYOR_LOG_FORMAT="json", CONVEYOR_LOG_LEVEL="INFO")  # fmt: skip
    env["PYTHONPATH"] = str(HERE) + os.pathsep + env.get("PYTHONPATH", "")
    argv = conveyor_argv("server", "--app", "reporting_app:app")
    server = ServerProcess(argv, env=env, cwd=HERE, stderr=subprocess.PIPE)
    process = server.process
    assert process.stderr is not None
    batches = server.lines  # stdout's, as they come
    try:

        def consumed() -> int:
            return sum(
                int(line.split()[3]) - int(line.split()[2]) + 1
                for line in batches
                if line.startswith("batch ")
            )

        # the app's own line: its partitions were assigned
        assert server.wait_for(lambda lines: any(b.startswith("assigned") for b in lines), 60)
        with Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 0}) as producer:
            for n in range(MESSAGES):  # lock-step: a batch each
                producer.produce_sync(topic=topic, payload={"n": n}, partition=n % 2)
                assert server.wait_until(lambda n=n: consumed() > n, 60), batches
        process.send_signal(signal.SIGTERM)
        stderr = process.stderr.read()
        assert process.wait(60) == 0, stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        server.join()
        process.stderr.close()

    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]  # JSON only
    assert lines, "the server logged nothing"
    assert all(line["process"] == process.pid for line in lines)
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    events = [line.get("event") for line in lines]
    for expected in ("server.starting", "app.running", "rebalance.partitions_assigned",
                     "app.stopping", "app.stopped", "server.stopped"):  # fmt: skip
        assert expected in events, events
    [running] = [line for line in lines if line.get("event") == "app.running"]
    assert group in running["group"]
    assigned = [line for line in lines if line.get("event") == "rebalance.partitions_assigned"]
    assert {line["group"] for line in assigned} == {group}
    assert {line["topic"] for line in assigned} == {topic}
    assert {p for line in assigned for p in line["partitions"]} == {f"{topic}/0", f"{topic}/1"}
    batch_count = sum(line.startswith("batch ") for line in batches)
    assert batch_count >= 10, "many batches, so that a line per batch would show"
    assert not [line for line in lines if "consumed" in line["message"]], "no line per batch"
    assert len(lines) < 15, [line["message"] for line in lines]
