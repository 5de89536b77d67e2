"""A local Kafka cluster: N development brokers on one machine, each in its own folder and on
its own ports, every one a voter of the KRaft controller quorum.

With three nodes every topic has three replicas and needs two in sync (``acks=all`` keeps
working with one node down), so an app can be shown to survive losing a broker. Node ``k``
listens on ``port + k - 1`` and its controller on ``port + 100 + k - 1``; the cluster's shape
(nodes, ports, cluster id) is recorded in ``cluster.json`` when it is first started, and each
node's folder is ``node-k`` under the cluster's data folder.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from conveyor.broker.layout import NodeRole, default_data_dir
from conveyor.broker.process import (
    DEFAULT_HEAP,
    BrokerStatus,
    DevelopmentBroker,
    new_cluster_id,
)
from conveyor.broker.progress import ProgressCallback
from conveyor.errors import BrokerDataError, BrokerError

__all__ = ["DEFAULT_CLUSTER_PORT", "ClusterShape", "LocalCluster", "default_cluster_dir"]

DEFAULT_CLUSTER_PORT = 19092
CONTROLLER_OFFSET = 100
MAX_NODES = 9
_HOST = "127.0.0.1"


def default_cluster_dir() -> Path:
    """``cluster`` beside the development broker's folder (``~/.local/share/conveyor/cluster``)."""
    return default_data_dir().parent / "cluster"


@dataclass(frozen=True)
class ClusterShape:
    """What ``cluster.json`` records: fixed once the cluster's storage is formatted."""

    nodes: int
    port: int
    cluster_id: str

    def broker_port(self, node: int) -> int:
        return self.port + node - 1

    def controller_port(self, node: int) -> int:
        return self.port + CONTROLLER_OFFSET + node - 1

    @property
    def voters(self) -> str:
        return ",".join(
            f"{node}@{_HOST}:{self.controller_port(node)}" for node in range(1, self.nodes + 1)
        )

    @property
    def bootstrap_servers(self) -> str:
        """Every node's address: the value for ``KAFKA_BOOTSTRAP_SERVERS``."""
        return ",".join(f"{_HOST}:{self.broker_port(n)}" for n in range(1, self.nodes + 1))


class LocalCluster:
    """``nodes`` development brokers forming one KRaft cluster in ``data_dir``.

    Example::

        cluster = LocalCluster(nodes=3)
        cluster.start()
        print(cluster.shape.bootstrap_servers)   # 127.0.0.1:19092,127.0.0.1:19093,...
        cluster.stop_node(2)
        cluster.start_node(2)
        cluster.stop()
    """

    def __init__(
        self,
        data_dir: Path | str | None = None,
        nodes: int = 3,
        port: int = DEFAULT_CLUSTER_PORT,
        heap: str = DEFAULT_HEAP,
    ) -> None:
        if not 1 <= nodes <= MAX_NODES:
            raise ValueError(f"a local cluster has 1 to {MAX_NODES} nodes, not {nodes}")
        if not 0 < port <= 65535 - CONTROLLER_OFFSET - nodes:
            raise ValueError(f"port {port} leaves no room for {nodes} brokers and controllers")
        self.root = Path(data_dir).expanduser() if data_dir else default_cluster_dir()
        self.requested = ClusterShape(nodes, port, "")
        self.heap = heap

    @property
    def record(self) -> Path:
        return self.root / "cluster.json"

    @property
    def shape(self) -> ClusterShape:
        """The recorded shape, else the one asked for (before the first start)."""
        try:
            return ClusterShape(**json.loads(self.record.read_text()))
        except FileNotFoundError:
            return self.requested
        except (ValueError, TypeError) as exc:
            raise BrokerDataError(
                f"{self.record} is damaged ({exc}): start afresh with "
                f"`conveyor broker stop --cluster --wipe --data-dir {self.root}`"
            ) from None

    def exists(self) -> bool:
        return self.record.exists()

    def node(self, number: int) -> DevelopmentBroker:
        """Node ``number`` (from 1) as a :class:`DevelopmentBroker`."""
        shape = self.shape
        if not 1 <= number <= shape.nodes:
            raise BrokerError(f"the cluster has nodes 1 to {shape.nodes}, not {number}")
        return DevelopmentBroker(
            self.root / f"node-{number}",
            port=shape.broker_port(number),
            heap=self.heap,
            role=NodeRole(number, shape.voters, shape.nodes),
            controller_port=shape.controller_port(number),
            cluster_id=shape.cluster_id,
        )

    def nodes(self) -> list[tuple[int, BrokerStatus | None]]:
        """Each node's number and status (``None`` when it is not running)."""
        return [(n, self.node(n).status()) for n in range(1, self.shape.nodes + 1)]

    # -- start and stop -----------------------------------------------------------------------

    def start(
        self, timeout: float = 180.0, on_progress: ProgressCallback | None = None
    ) -> list[BrokerStatus]:
        """Start every node that is not running (formatting the storage on the first start)
        and wait until each answers. A cluster keeps its shape: asking for another node count
        or port than the recorded one is an error.

        Raises:
            BrokerPortBusyError: a node's port or controller port is taken (named).
            BrokerError: another shape than the recorded one, or a node that did not start.
        """
        self._settle_shape()
        deadline = time.monotonic() + timeout
        for number, status in self.nodes():
            if status is None:  # every port checked before any JVM starts
                self.node(number).check_ports_free()
        launched = []
        try:
            for number in range(1, self.shape.nodes + 1):
                node = self.node(number)
                launched.append((node, node.launch(on_progress)))
            for node, outcome in launched:
                if not outcome.already_running:
                    node.wait_until_ready(outcome.status, deadline - time.monotonic(), on_progress)
        except BaseException:
            for node, outcome in launched:
                if not outcome.already_running:
                    node.stop(timeout=10)
            raise
        return [outcome.status for _, outcome in launched]

    def _settle_shape(self) -> None:
        if self.exists():
            recorded = self.shape
            asked = self.requested
            if (recorded.nodes, recorded.port) != (asked.nodes, asked.port):
                raise BrokerError(
                    f"The cluster in {self.root} has {recorded.nodes} nodes from port "
                    f"{recorded.port}; it keeps that shape. Start it with `--nodes "
                    f"{recorded.nodes} --port {recorded.port}`, or delete it with `conveyor "
                    f"broker stop --cluster --wipe --data-dir {self.root}` first."
                )
            return
        self.root.mkdir(parents=True, exist_ok=True)
        shape = ClusterShape(self.requested.nodes, self.requested.port, new_cluster_id())
        self.record.write_text(json.dumps(asdict(shape), indent=2) + "\n")

    def start_node(
        self, number: int, timeout: float = 120.0, on_progress: ProgressCallback | None = None
    ) -> BrokerStatus:
        """Start one node again and wait until it answers."""
        if not self.exists():
            raise BrokerError(
                f"There is no cluster in {self.root}: start it with `conveyor broker start "
                "--nodes 3` first."
            )
        return self.node(number).start(timeout=timeout, on_progress=on_progress).status

    def stop_node(self, number: int, timeout: float = 30.0) -> BrokerStatus | None:
        """Stop one node gracefully; the others go on (``None`` when it was not running)."""
        return self.node(number).stop(timeout=timeout)

    def stop(self, timeout: float = 30.0, wipe: bool = False) -> list[BrokerStatus]:
        """Stop every node (and with ``wipe`` delete the cluster's folder); the stopped ones."""
        stopped = []
        if self.exists():
            nodes = [self.node(number) for number in range(self.shape.nodes, 0, -1)]
            # Every node is told at once: stopped one by one, the last ones lose the quorum of
            # controllers their own graceful shutdown asks, and wait it out.
            for node in nodes:
                node.begin_stop()
            for node in nodes:
                status = node.stop(timeout=timeout, wipe=wipe)
                if status is not None:
                    stopped.append(status)
        if wipe:
            self.record.unlink(missing_ok=True)
            for lock in self.root.glob(".node-*.lock"):
                lock.unlink()
            if self.root.exists() and not any(self.root.iterdir()):
                self.root.rmdir()
        return stopped
