"""The swarm's supervisor with stand-in nodes (small Python processes, no Kafka): the restart
budget, the heartbeat deadline and a clean stop."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

from conveyor.swarm import Supervisor
from conveyor.swarm.supervisor import HEARTBEAT_ENV, NODE_ENV

# a node that writes its number into the folder argv[1], beats ten times a second and
# exits 0 on SIGTERM (as `conveyor server` does after a graceful stop)
BEAT = (
    "import os, signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
    f"open(os.path.join(sys.argv[1], os.environ[{NODE_ENV!r}]), 'w').close()\n"
    f"fd = int(os.environ[{HEARTBEAT_ENV!r}])\n"
    "for _ in range(300):\n"
    "    os.write(fd, b'.')\n"
    "    time.sleep(0.1)\n"
)


def run(code: str, nodes: int, **options: object) -> tuple[int, list[str]]:
    said: list[str] = []
    supervisor = Supervisor([sys.executable, "-c", code], nodes, say=said.append, **options)  # type: ignore[arg-type]
    return supervisor.run(), said


def test_nodes_that_keep_dying_stop_the_swarm_with_a_non_zero_exit() -> None:
    code, said = run("raise SystemExit(3)", 2, max_restarts=3)
    assert code == 1
    assert sum("exited with 3: replacing it" in line for line in said) == 3
    assert any("more than 3 replacements in a minute" in line for line in said)


def test_a_node_that_never_beats_is_replaced() -> None:
    code, said = run("import time; time.sleep(30)", 1, startup=0.5, max_restarts=0)
    assert code == 1
    assert any("node 1 sent no heartbeat" in line for line in said), said


def test_beating_nodes_are_left_alone_and_sigterm_stops_the_swarm_cleanly(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    supervisor = Supervisor(
        [sys.executable, "-c", BEAT, str(tmp_path)], 2, liveness=1.0, startup=1.0,
        say=said.append,
    )  # fmt: skip
    # SIGTERM after 3 s (three liveness periods), the way a user's `kill` would arrive
    timer = threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        code = supervisor.run()
    finally:
        timer.cancel()
    assert code == 0, said
    assert not any("replacing" in line for line in said), said
    assert sorted(line for line in said if "stopped (" in line) == [
        "node 1 stopped (0)",
        "node 2 stopped (0)",
    ]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["1", "2"]  # their numbers
