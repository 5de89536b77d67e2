"""Start, stop and inspect the development broker: a KRaft Kafka JVM running in the background."""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import json
import os
import select
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from conveyor.broker.layout import (
    BrokerLayout,
    NodeRole,
    default_data_dir,
    render_log4j2,
    render_server_properties,
)
from conveyor.broker.maven import KAFKA_VERSION, ensure_kafka_jars
from conveyor.broker.probe import ClusterMetadata, ProbeError, probe_metadata
from conveyor.broker.progress import ProgressCallback
from conveyor.broker.security import (
    SECURITY_USER,
    SecurityMaterial,
    ensure_material,
    security_ports,
    security_properties,
)
from conveyor.broker.toolchain import find_java
from conveyor.errors import (
    BrokerDataError,
    BrokerError,
    BrokerPortBusyError,
    BrokerStartError,
)

__all__ = ["BrokerStatus", "DevelopmentBroker", "StartOutcome"]


DEFAULT_PORT = 9092
DEFAULT_HEAP = "512m"
_HOST = "127.0.0.1"
# Kafka's own scripts' defaults (kafka-run-class.sh), which KAFKA_JVM_PERFORMANCE_OPTS replaces.
_JVM_PERFORMANCE_OPTIONS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
# A one-shot tool: the client compiler and the serial collector start it in a third less CPU.
_TOOL_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true")
_PROBE_INTERVAL = 0.2


@dataclass(frozen=True)
class BrokerStatus:
    """A running development broker, as recorded when it started."""

    pid: int
    port: int
    controller_port: int
    version: str
    data_dir: str
    started_at: float
    """Wall-clock start time (seconds since the epoch)."""
    secure_ports: dict[str, int] | None = None
    """The secure listeners (protocol to port) when started with ``security=True``."""

    @property
    def bootstrap_servers(self) -> str:
        """The value for ``bootstrap.servers`` / ``KAFKA_BOOTSTRAP_SERVERS``."""
        return f"{_HOST}:{self.port}"

    @property
    def uptime(self) -> float:
        """Seconds since the broker started."""
        return max(0.0, time.time() - self.started_at)


@dataclass(frozen=True)
class StartOutcome:
    """What :meth:`DevelopmentBroker.start` found or did."""

    status: BrokerStatus
    already_running: bool


class DevelopmentBroker:
    """One single-node KRaft Kafka broker whose files live in ``data_dir``.

    The broker outlives the Python process that started it: its pid, ports and
    start time are recorded in the data folder, so ``status`` and ``stop`` work
    from any later process.

    Example::

        broker = DevelopmentBroker(port=9092)
        outcome = broker.start()
        print(outcome.status.bootstrap_servers)
        broker.stop()
    """

    def __init__(
        self,
        data_dir: Path | str | None = None,
        port: int = DEFAULT_PORT,
        heap: str = DEFAULT_HEAP,
        *,
        role: NodeRole | None = None,
        controller_port: int | None = None,
        cluster_id: str | None = None,
        security: bool = False,
    ) -> None:
        """``role``, ``controller_port`` and ``cluster_id`` make it one node of a
        :class:`~conveyor.broker.cluster.LocalCluster` (fixed ports, a shared cluster id);
        ``security`` adds SASL and TLS listeners (see :mod:`conveyor.broker.security`)."""
        if not 0 < port < 65536:
            raise ValueError(f"port must be between 1 and 65535, got {port}")
        self.layout = BrokerLayout(Path(data_dir).expanduser() if data_dir else default_data_dir())
        self.port = port
        self.heap = heap
        self.role = role
        self.controller_port = controller_port
        self.cluster_id = cluster_id
        self.security = security
        self._secure: tuple[dict[str, int], dict[str, str]] | None = None

    @property
    def data_dir(self) -> Path:
        return self.layout.root

    @property
    def _data_dir_flag(self) -> str:
        """`` --data-dir X`` for advice printed to the user, when X is not the default."""
        return "" if self.layout.root == default_data_dir() else f" --data-dir {self.layout.root}"

    # -- status ---------------------------------------------------------------------------

    def status(self) -> BrokerStatus | None:
        """The running broker of this data folder, or ``None`` (a stale record is removed)."""
        try:
            record = json.loads(self.layout.state_file.read_text())
            status = BrokerStatus(**record)
        except FileNotFoundError:
            return None
        except (ValueError, TypeError):
            self.layout.state_file.unlink(missing_ok=True)
            return None
        if not self._is_our_process(status.pid):
            _reap(status.pid)
            self.layout.state_file.unlink(missing_ok=True)
            return None
        return status

    def metadata(self, timeout: float = 2.0) -> ClusterMetadata | None:
        """Ask the running broker for its metadata; ``None`` when it does not answer."""
        status = self.status()
        if status is None:
            return None
        try:
            return probe_metadata(_HOST, status.port, timeout=timeout)
        except (OSError, ProbeError):
            return None

    # -- start ----------------------------------------------------------------------------

    def start(
        self, timeout: float = 120.0, on_progress: ProgressCallback | None = None
    ) -> StartOutcome:
        """Start the broker unless it already runs; return once it answers a metadata request.

        Formats the KRaft storage on first start and fetches the jars with Maven when they
        are not cached yet. Starting twice is harmless.

        Raises:
            ToolMissingError: Java (or, on first use, Maven) is missing.
            BrokerPortBusyError: something else listens on the port.
            BrokerDataError: the data folder is corrupt or not Conveyor's.
            BrokerStartError: the JVM exited, or did not answer within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        outcome = self.launch(on_progress)
        if not outcome.already_running:
            self.wait_until_ready(outcome.status, deadline - time.monotonic(), on_progress)
        return outcome

    def launch(self, on_progress: ProgressCallback | None = None) -> StartOutcome:
        """Spawn the JVM unless it already runs, without waiting for it to answer (the nodes
        of a cluster answer only once a majority of them runs); see :meth:`start`."""
        progress = on_progress or (lambda _message: None)
        self.layout.root.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.layout.root.parent / f".{self.layout.root.name}.lock"
        with open(lock_path, "w") as lock:
            # Two commands starting the same broker at once: the second finds it running.
            fcntl.flock(lock, fcntl.LOCK_EX)
            existing = self.status()
            if existing is not None:
                return StartOutcome(existing, already_running=True)
            return StartOutcome(self._launch_locked(progress), already_running=False)

    def check_ports_free(self) -> None:
        """Raise :class:`BrokerPortBusyError` (naming the port and what holds it) when its
        port, its fixed controller port or a secure listener's port is taken."""
        self._check_port_free(self.port)
        if self.controller_port is not None:
            self._check_port_free(self.controller_port)
        if self.security:
            for port in security_ports(self.port).values():
                self._check_port_free(port)

    @property
    def security_folder(self) -> Path:
        """Where ``security=True`` keeps its certificates and passwords."""
        return self.layout.root / "security"

    def security_material(self) -> SecurityMaterial | None:
        """The certificates and passwords of the secure listeners (``None`` before the first
        start with ``security=True``)."""
        record = self.security_folder / "security.json"
        if not record.exists():
            return None
        return SecurityMaterial(**json.loads(record.read_text()))

    def _launch_locked(self, progress: ProgressCallback) -> BrokerStatus:
        java = find_java()
        self.check_ports_free()
        libs = ensure_kafka_jars(progress)
        self._prepare_data_dir()
        if self.security:
            material = ensure_material(self.security_folder, java, progress)
            self._secure = (security_ports(self.port), security_properties(material))
        if not self.layout.meta_properties.exists():
            progress(f"formatting KRaft storage in {self.layout.kraft_dir}")
            self._format_storage(java, libs)
        controller_port = self.controller_port or _free_port()
        self.layout.server_properties.write_text(self._properties(controller_port))
        self.layout.log4j_config.write_text(render_log4j2(self.layout))
        progress(f"starting Kafka {KAFKA_VERSION} on {_HOST}:{self.port}")
        pid = self._spawn(java, libs)
        status = BrokerStatus(
            pid=pid,
            port=self.port,
            controller_port=controller_port,
            version=KAFKA_VERSION,
            data_dir=str(self.layout.root),
            started_at=time.time(),
            secure_ports=self._secure[0] if self._secure else None,
        )
        self.layout.state_file.write_text(json.dumps(asdict(status), indent=2) + "\n")
        return status

    def wait_until_ready(
        self, status: BrokerStatus, timeout: float, on_progress: ProgressCallback | None = None
    ) -> None:
        """Wait until the launched broker answers with itself in the cluster's metadata; kill
        it when it does not within ``timeout`` seconds or exits (the error says why)."""
        progress = on_progress or (lambda _message: None)
        try:
            self._wait_until_ready(status, time.monotonic() + timeout, progress)
            if status.secure_ports:
                self._create_user(status, progress)
        except BaseException:
            self._kill(status.pid)
            self.layout.state_file.unlink(missing_ok=True)
            raise

    def _create_user(self, status: BrokerStatus, progress: ProgressCallback) -> None:
        """Store the SCRAM credential of the secure listeners' user (through PLAINTEXT)."""
        from conveyor.admin import Admin  # noqa: PLC0415 - only brokers with security need it

        material = self.security_material()
        assert material is not None
        progress(f"storing the SCRAM-SHA-512 credential of user {SECURITY_USER!r}")
        with Admin({"bootstrap.servers": status.bootstrap_servers}, timeout=30) as admin:
            admin.set_scram_credentials(SECURITY_USER, material.user_password)

    def _check_port_free(self, port: int) -> None:
        if _port_is_free(port):
            return
        try:
            probe_metadata(_HOST, port, timeout=1.0)
            is_kafka = True
        except (OSError, ProbeError):
            is_kafka = False
        if is_kafka:
            raise BrokerPortBusyError(
                f"Port {port} on {_HOST} is already taken by a Kafka broker that this data folder "
                f"did not start. Use that broker with KAFKA_BOOTSTRAP_SERVERS={_HOST}:{port}, or "
                "pick another port for the development broker with `conveyor broker start --port N`."
            )
        raise BrokerPortBusyError(
            f"Port {port} on {_HOST} is already taken by another program, so the development "
            "broker cannot listen there. Pick another port with `conveyor broker start --port N` "
            f"(and KAFKA_BOOTSTRAP_SERVERS={_HOST}:N for the tests), or stop what holds it "
            f"(`ss -ltnp 'sport = :{port}'` shows it)."
        )

    def _prepare_data_dir(self) -> None:
        root = self.layout.root
        if root.exists() and any(root.iterdir()) and not self.layout.marker.exists():
            raise BrokerDataError(
                f"The data folder {root} is not empty and was not made by Conveyor, so the "
                "development broker will not write into it. Choose an empty or new folder with "
                "`--data-dir`, or empty this one yourself."
            )
        self.layout.logs_dir.mkdir(parents=True, exist_ok=True)
        self.layout.marker.touch()
        kraft = self.layout.kraft_dir
        if not self.layout.meta_properties.exists() and kraft.exists() and any(kraft.iterdir()):
            raise BrokerDataError(
                f"The broker's data in {kraft} has no meta.properties: the folder is damaged "
                "(an interrupted format, or files deleted by hand). Start afresh with "
                f"`conveyor broker stop --wipe{self._data_dir_flag}` (this deletes its topics), or use "
                "another `--data-dir`."
            )

    def _format_storage(self, java: Path, libs: Path) -> None:
        cluster_id = self.cluster_id or new_cluster_id()
        config = self.layout.server_properties
        # The formatter reads the same properties the broker will run with.
        config.write_text(self._properties(self.controller_port or _free_port()))
        self.layout.log4j_config.write_text(render_log4j2(self.layout))
        command = [
            str(java),
            "-Xmx256m",
            *_TOOL_OPTIONS,
            f"-Dlog4j2.configurationFile={self.layout.log4j_config}",
            "-cp",
            f"{libs}/*",
            "kafka.tools.StorageTool",
            "format",
            # One argument, "=" joined: a base64url id may start with "-", which the
            # formatter's argument parser would take for an option (seen: 1 start in ~60).
            f"--cluster-id={cluster_id}",
            "--config",
            str(config),
        ]
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        if result.returncode != 0:
            shutil.rmtree(self.layout.kraft_dir, ignore_errors=True)
            raise BrokerDataError(
                f"Kafka could not format its storage in {self.layout.kraft_dir} "
                f"(exit code {result.returncode}). Try `conveyor broker stop --wipe"
                f"{self._data_dir_flag}` and start again, or use another `--data-dir`. "
                "Kafka said:\n" + (result.stdout + result.stderr).strip()[-2000:]
            )

    def _properties(self, controller_port: int) -> str:
        ports, settings = self._secure or (None, None)
        return render_server_properties(
            self.layout, self.port, controller_port, self.role, ports, settings
        )

    def _spawn(self, java: Path, libs: Path) -> int:
        argv = [
            str(java),
            f"-Xms{min_heap(self.heap)}",
            f"-Xmx{self.heap}",
            *jvm_performance_options(),
            f"-Dlog4j2.configurationFile={self.layout.log4j_config}",
            f"-Dkafka.logs.dir={self.layout.logs_dir}",
            "-cp",
            f"{libs}/*",
            "kafka.Kafka",
            str(self.layout.server_properties),
        ]
        console = str(self.layout.console_log)
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, console, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ]
        # A new session: the broker survives the terminal and the command that started it.
        return os.posix_spawn(argv[0], argv, dict(os.environ), file_actions=actions, setsid=True)

    def _wait_until_ready(
        self, status: BrokerStatus, deadline: float, progress: ProgressCallback
    ) -> None:
        # Another broker that took the port first (one whose start raced this one's) must not
        # pass for this one: only an answer from the cluster this data folder formats counts.
        cluster_id = self._formatted_cluster_id()
        watch = _ExitWatch(status.pid)
        began = time.monotonic()
        announced = 0
        try:
            while True:
                try:
                    metadata = probe_metadata(_HOST, status.port, timeout=1.0)
                    if metadata.cluster_id == cluster_id and any(
                        node.port == status.port for node in metadata.brokers
                    ):
                        return
                except (OSError, ProbeError):
                    pass
                now = time.monotonic()
                if now >= deadline:
                    raise BrokerStartError(
                        f"The broker did not answer on {status.bootstrap_servers} within the "
                        f"deadline ({now - began:.0f} s after it started). The machine may be "
                        "overloaded: try again with a longer `--timeout`. The end of its log:\n"
                        + self._log_tail()
                    )
                if int(now - began) >= announced + 2:
                    announced = int(now - began)
                    progress(f"waiting for the broker to answer ({announced} s)")
                if watch.wait(min(_PROBE_INTERVAL, deadline - now)):
                    raise self._diagnose_exit()
        finally:
            watch.close()

    def _formatted_cluster_id(self) -> str | None:
        for line in self.layout.meta_properties.read_text().splitlines():
            name, _, value = line.partition("=")
            if name.strip() == "cluster.id":
                return value.strip()
        return None

    def _diagnose_exit(self) -> BrokerError:
        tail = self._log_tail()
        if "Address already in use" in tail or "BindException" in tail:
            return BrokerPortBusyError(
                f"The broker exited at start because a port is in use (its own {self.port} or "
                "its controller port). Pick another with `--port`, or stop what holds it. "
                "The end of its log:\n" + tail
            )
        corrupt_signs = (
            f"in {self.layout.kraft_dir}",
            "initializeLogDirs",
            "meta.properties",
            "InconsistentClusterIdException",
            "CorruptRecordException",
            "KafkaStorageException",
            "InvalidRecordException",
        )
        if any(sign in tail for sign in corrupt_signs):
            return BrokerDataError(
                f"The broker exited at start because its data in {self.layout.kraft_dir} cannot "
                "be read. Start afresh with "
                f"`conveyor broker stop --wipe{self._data_dir_flag}` (this deletes its topics), "
                "or use another `--data-dir`. The end of its log:\n" + tail
            )
        return BrokerStartError(
            f"The broker exited during start. Its logs are in {self.layout.logs_dir}; the end:\n"
            + tail
        )

    def _log_tail(self, lines: int = 30) -> str:
        chunks = []
        for path in (self.layout.console_log, self.layout.server_log):
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace").splitlines()[-lines:]
                if text:
                    chunks.append(f"--- {path} ---\n" + "\n".join(text))
        return "\n".join(chunks) or "(no log written)"

    # -- stop -----------------------------------------------------------------------------

    def stop(self, timeout: float = 30.0, wipe: bool = False) -> BrokerStatus | None:
        """Stop the broker gracefully (SIGTERM; SIGKILL after ``timeout``) and wait for it to exit.

        With ``wipe``, also delete the data folder (topics and all). Returns the status of the
        broker that was stopped, or ``None`` when none was running.
        """
        status = self.status()
        if status is not None:
            self._terminate(status.pid, timeout)
            self.layout.state_file.unlink(missing_ok=True)
        if wipe and self.layout.root.exists():
            if not self.layout.marker.exists():
                raise BrokerDataError(
                    f"{self.layout.root} was not made by Conveyor; `--wipe` leaves it alone."
                )
            shutil.rmtree(self.layout.root)
        return status

    def begin_stop(self) -> None:
        """Ask the broker to stop (SIGTERM) without waiting; :meth:`stop` then waits for it."""
        status = self.status()
        if status is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(status.pid, signal.SIGTERM)

    def _terminate(self, pid: int, timeout: float) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        watch = _ExitWatch(pid)
        try:
            if not watch.wait(timeout):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                watch.wait(10.0)
        finally:
            watch.close()
        _reap(pid)

    def _kill(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        watch = _ExitWatch(pid)
        try:
            watch.wait(10.0)
        finally:
            watch.close()
        _reap(pid)

    def _is_our_process(self, pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return False
        cmdline = Path(f"/proc/{pid}/cmdline")
        if not cmdline.parent.exists():
            return True  # no /proc: trust the live pid
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            return False
        return b"kafka.Kafka" in args and str(self.layout.server_properties).encode() in args


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, base64url without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def jvm_performance_options() -> list[str]:
    """The broker's JVM options: ``$KAFKA_JVM_PERFORMANCE_OPTS`` when set, as Kafka's scripts do."""
    custom = os.environ.get("KAFKA_JVM_PERFORMANCE_OPTS", "").strip()
    return shlex.split(custom) if custom else list(_JVM_PERFORMANCE_OPTIONS)


def min_heap(heap: str) -> str:
    """The initial heap: a quarter of the maximum for plain sizes such as ``512m``, else the same."""
    digits, unit = heap[:-1], heap[-1:].lower()
    if digits.isdigit() and unit in ("m", "g"):
        megabytes = int(digits) * (1024 if unit == "g" else 1)
        return f"{max(64, megabytes // 4)}m"
    return heap


class _ExitWatch:
    """Waits for a process to exit, waking the moment it does (a pidfd where Linux has one)."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._fd: int | None = None
        self._gone = threading.Event()
        try:
            self._fd = os.pidfd_open(pid)
        except ProcessLookupError:
            self._gone.set()
        except (AttributeError, OSError):
            self._fd = None

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; return whether the process has exited."""
        if self._gone.is_set():
            return True
        if self._fd is not None:
            readable, _, _ = select.select([self._fd], [], [], max(0.0, timeout))
            exited = bool(readable)
        else:  # no pidfd (not Linux): check once after the interval
            self._gone.wait(max(0.0, timeout))
            exited = not _alive(self._pid)
        if exited:
            self._gone.set()
        return exited

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    status = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError):
        return status.read_text().split(")", 1)[1].split()[0] != "Z"
    return True


def _reap(pid: int) -> None:
    """Collect the exit status if the broker was our own child (no zombie left behind)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((_HOST, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_HOST, 0))
        return int(sock.getsockname()[1])
