"""`conveyor broker` starts a real KRaft Kafka once, reports it, stops it, keeps or wipes its
data, and explains in one paragraph what went wrong when it cannot start."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import helpers
from conveyor.broker import DevelopmentBroker, probe_metadata
from conveyor.errors import BrokerPortBusyError

pytestmark = pytest.mark.xdist_group("brokers")  # xdist: see tests/conftest.py


def conveyor(
    *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a user would, with no terminal and no standard input."""
    return subprocess.run(
        [sys.executable, "-m", "conveyor", *map(str, args)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        timeout=240,
        check=False,
    )


def running(pid: int) -> bool:
    """True while the process exists and is not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.fixture(name="free_port")
def a_free_port() -> int:
    return helpers.free_port()


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "broker"
    yield folder
    conveyor("broker", "stop", "--data-dir", folder)


def test_start_twice_status_stop_restart_and_wipe(data_dir: Path, free_port: int) -> None:
    first = conveyor("broker", "start", "--port", free_port, "--data-dir", data_dir)
    assert first.returncode == 0, first.stderr
    assert f"ready at 127.0.0.1:{free_port}" in first.stdout
    assert "formatting KRaft storage" in first.stderr
    metadata = probe_metadata("127.0.0.1", free_port)
    assert [node.port for node in metadata.brokers] == [free_port]

    second = conveyor("broker", "start", "--port", free_port, "--data-dir", data_dir)
    assert second.returncode == 0, second.stderr
    assert "already running" in second.stdout

    status = conveyor("broker", "status", "--data-dir", data_dir, "--json")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["running"] is True
    assert report["answering"] is True
    assert report["bootstrap_servers"] == f"127.0.0.1:{free_port}"
    assert report["version"] == "4.1.1"
    assert report["data_dir"] == str(data_dir)
    assert report["cluster_id"] == metadata.cluster_id
    assert 0 <= report["uptime_seconds"] < 600
    pid = report["pid"]
    assert running(pid)

    table = conveyor("broker", "status", "--data-dir", data_dir)
    for expected in (f"127.0.0.1:{free_port}", str(pid), "Apache Kafka 4.1.1", "uptime"):
        assert expected in table.stdout

    logs = conveyor("broker", "logs", "--data-dir", data_dir, "-n", "200")
    assert "Kafka Server started" in logs.stdout

    stopped = conveyor("broker", "stop", "--data-dir", data_dir)
    assert stopped.returncode == 0, stopped.stderr
    assert f"pid {pid}" in stopped.stdout
    assert not running(pid)
    assert conveyor("broker", "status", "--data-dir", data_dir).returncode == 3
    assert (data_dir / "kraft" / "meta.properties").exists(), "stop keeps the data"

    restarted = conveyor("broker", "start", "--port", free_port, "--data-dir", data_dir)
    assert restarted.returncode == 0, restarted.stderr
    assert "formatting" not in restarted.stderr
    assert probe_metadata("127.0.0.1", free_port).cluster_id == metadata.cluster_id

    wiped = conveyor("broker", "stop", "--data-dir", data_dir, "--wipe")
    assert wiped.returncode == 0, wiped.stderr
    assert not data_dir.exists()


def test_stop_when_nothing_runs_says_so(data_dir: Path) -> None:
    result = conveyor("broker", "stop", "--data-dir", data_dir)
    assert result.returncode == 0
    assert "not running" in result.stdout


def test_a_port_held_by_another_program_is_a_clear_error(data_dir: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = conveyor("broker", "start", "--port", port, "--data-dir", data_dir)
    assert result.returncode == 1
    assert f"Port {port} on 127.0.0.1 is already taken by another program" in result.stderr
    assert "--port" in result.stderr
    assert not data_dir.exists(), "nothing is written before the port is known to be free"


def test_a_port_held_by_another_kafka_points_at_it(data_dir: Path, kafka_bootstrap: str) -> None:
    host, _, port = kafka_bootstrap.partition(",")[0].rpartition(":")
    if host not in ("127.0.0.1", "localhost"):
        pytest.skip("the suite's broker is not on this machine")
    result = conveyor("broker", "start", "--port", port, "--data-dir", data_dir)
    assert result.returncode == 1
    assert "already taken by a Kafka broker" in result.stderr
    assert f"KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:{port}" in result.stderr


def test_a_kafka_that_took_the_port_after_the_check_does_not_pass_for_this_broker(
    data_dir: Path, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two starts on one port can both find it free; the loser's JVM then exits on the bind,
    while the winner already answers there. The loser must fail, not report itself ready."""
    host, _, port = kafka_bootstrap.partition(",")[0].rpartition(":")
    if host not in ("127.0.0.1", "localhost"):
        pytest.skip("the suite's broker is not on this machine")
    broker = DevelopmentBroker(data_dir, port=int(port))
    monkeypatch.setattr(broker, "check_ports_free", lambda: None)  # the race: the check passed
    with pytest.raises(BrokerPortBusyError, match="port is in use"):
        broker.start(timeout=120)
    assert broker.status() is None


def test_a_damaged_data_folder_suggests_wipe(data_dir: Path, free_port: int) -> None:
    assert conveyor("broker", "start", "--port", free_port, "--data-dir", data_dir).returncode == 0
    assert conveyor("broker", "stop", "--data-dir", data_dir).returncode == 0
    (data_dir / "kraft" / "meta.properties").write_text("node.id=oops\n")

    result = conveyor("broker", "start", "--port", free_port, "--data-dir", data_dir)
    assert result.returncode == 1
    assert "cannot be read" in result.stderr
    assert f"conveyor broker stop --wipe --data-dir {data_dir}" in result.stderr
    assert conveyor("broker", "status", "--data-dir", data_dir).returncode == 3


def test_data_without_meta_properties_is_refused_before_starting(
    data_dir: Path, free_port: int
) -> None:
    (data_dir / "kraft" / "__cluster_metadata-0").mkdir(parents=True)
    (data_dir / ".conveyor-broker").touch()
    result = conveyor("broker", "start", "--port", free_port, "--data-dir", data_dir)
    assert result.returncode == 1
    assert "has no meta.properties" in result.stderr
    assert "--wipe" in result.stderr


def test_a_folder_that_is_not_conveyors_is_left_alone(data_dir: Path, free_port: int) -> None:
    data_dir.mkdir()
    (data_dir / "thesis.tex").write_text("precious")
    result = conveyor("broker", "start", "--port", free_port, "--data-dir", data_dir)
    assert result.returncode == 1
    assert "was not made by Conveyor" in result.stderr
    wipe = conveyor("broker", "stop", "--wipe", "--data-dir", data_dir)
    assert wipe.returncode == 1
    assert (data_dir / "thesis.tex").read_text() == "precious"


def test_missing_java_is_explained(data_dir: Path, free_port: int, tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "JAVA_HOME"}
    env["PATH"] = str(tmp_path / "empty")
    result = conveyor("broker", "start", "--port", free_port, "--data-dir", data_dir, env=env)
    assert result.returncode == 1
    assert "Java was not found" in result.stderr
    assert "KAFKA_BOOTSTRAP_SERVERS" in result.stderr


def test_missing_maven_is_explained_when_jars_are_not_cached(
    data_dir: Path, free_port: int, tmp_path: Path
) -> None:
    java = shutil.which("java")
    assert java is not None
    env = dict(os.environ)
    env["JAVA_HOME"] = str(Path(java).resolve().parent.parent)
    env["PATH"] = str(tmp_path / "empty")
    env["CONVEYOR_CACHE_DIR"] = str(tmp_path / "cache")
    result = conveyor("broker", "start", "--port", free_port, "--data-dir", data_dir, env=env)
    assert result.returncode == 1
    assert "Maven (`mvn`) was not found" in result.stderr


def test_exec_uses_the_configured_kafka_and_returns_the_command_exit_code(
    kafka_bootstrap: str,
) -> None:
    env = dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap)
    script = "import os, sys; print(os.environ['KAFKA_BOOTSTRAP_SERVERS']); sys.exit(7)"
    result = conveyor("broker", "exec", "--", sys.executable, "-c", script, env=env)
    assert result.returncode == 7
    assert result.stdout.strip() == kafka_bootstrap
    assert f"Using the Kafka at KAFKA_BOOTSTRAP_SERVERS={kafka_bootstrap}" in result.stderr


def test_exec_stops_the_broker_it_started_and_leaves_one_it_found(
    data_dir: Path, free_port: int
) -> None:
    env = {key: value for key, value in os.environ.items() if key != "KAFKA_BOOTSTRAP_SERVERS"}
    script = "import os; print(os.environ['KAFKA_BOOTSTRAP_SERVERS'])"
    args = ("broker", "exec", "--port", free_port, "--data-dir", data_dir, "--")

    own = conveyor(*args, sys.executable, "-c", script, env=env)
    assert own.returncode == 0, own.stderr
    assert own.stdout.strip() == f"127.0.0.1:{free_port}"
    assert "Started the development broker" in own.stderr
    assert conveyor("broker", "status", "--data-dir", data_dir).returncode == 3

    assert conveyor("broker", "start", "--port", free_port, "--data-dir", data_dir).returncode == 0
    found = conveyor(*args, sys.executable, "-c", script, env=env)
    assert found.returncode == 0, found.stderr
    assert "Reusing the running development broker" in found.stderr
    assert conveyor("broker", "status", "--data-dir", data_dir).returncode == 0


def test_a_cluster_id_that_starts_with_a_dash_formats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free_port: int
) -> None:
    """Cluster ids are base64url and about one in 60 starts with "-": the storage formatter
    must get it as the option's value, not as another option."""
    import uuid  # noqa: PLC0415 - only this test needs it

    from conveyor.broker import process  # noqa: PLC0415

    dashed = uuid.UUID(bytes=b"\xf8" + bytes(15))  # base64url of 0xF8... begins with "-"
    monkeypatch.setattr(process.uuid, "uuid4", lambda: dashed)
    broker = process.DevelopmentBroker(tmp_path / "broker", port=free_port)
    broker.layout.kraft_dir.mkdir(parents=True)
    broker._format_storage(process.find_java(), process.ensure_kafka_jars(lambda _m: None))
    assert "cluster.id=-" in broker.layout.meta_properties.read_text()
