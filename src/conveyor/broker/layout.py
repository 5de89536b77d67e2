"""The development broker's data folder: where each file lives and what the config files say."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BrokerLayout", "NodeRole", "default_data_dir"]

MARKER_NAME = ".conveyor-broker"


def default_data_dir() -> Path:
    """``$CONVEYOR_BROKER_DIR``, else ``$XDG_DATA_HOME/conveyor/broker``, else ``~/.local/share/conveyor/broker``."""
    explicit = os.environ.get("CONVEYOR_BROKER_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "conveyor" / "broker"


@dataclass(frozen=True)
class BrokerLayout:
    """Paths inside one broker's data folder."""

    root: Path

    @property
    def marker(self) -> Path:
        """Says the folder was made by Conveyor (``--wipe`` deletes nothing else)."""
        return self.root / MARKER_NAME

    @property
    def state_file(self) -> Path:
        """JSON record of the running process (pid, ports, start time)."""
        return self.root / "broker.json"

    @property
    def server_properties(self) -> Path:
        return self.root / "server.properties"

    @property
    def log4j_config(self) -> Path:
        return self.root / "log4j2.yaml"

    @property
    def kraft_dir(self) -> Path:
        """Kafka's ``log.dirs``: topic data and the KRaft metadata log."""
        return self.root / "kraft"

    @property
    def meta_properties(self) -> Path:
        return self.kraft_dir / "meta.properties"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def server_log(self) -> Path:
        return self.logs_dir / "server.log"

    @property
    def console_log(self) -> Path:
        """What the JVM wrote to stdout and stderr (crashes before logging starts)."""
        return self.logs_dir / "console.log"


@dataclass(frozen=True)
class NodeRole:
    """One node's place in a local cluster: its id, the controller quorum's voters
    (``1@127.0.0.1:19192,2@...``) and how many nodes there are (which sets the replication)."""

    node_id: int
    voters: str
    nodes: int


def render_server_properties(
    layout: BrokerLayout,
    port: int,
    controller_port: int,
    role: NodeRole | None = None,
    secure: Mapping[str, int] | None = None,
    secure_settings: Mapping[str, str] | None = None,
) -> str:
    """A KRaft broker and controller on 127.0.0.1, tuned for one machine: a single node, or
    with ``role`` one node of a local cluster (every node a voter of the controller quorum;
    three replicas and two in sync for every topic, internal ones included). ``secure`` adds
    listeners (security protocol to port) configured by ``secure_settings`` (see
    :mod:`conveyor.broker.security`)."""
    replicas = min(3, role.nodes) if role else 1
    in_sync = max(1, replicas - 1)
    extra = dict(secure or {})
    advertised = [f"PLAINTEXT://127.0.0.1:{port}"]
    advertised += [f"{name}://127.0.0.1:{extra_port}" for name, extra_port in extra.items()]
    protocols = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT", *(f"{n}:{n}" for n in extra)]
    settings = {
        "process.roles": "broker,controller",
        "node.id": str(role.node_id if role else 1),
        "controller.quorum.voters": role.voters if role else f"1@127.0.0.1:{controller_port}",
        "listeners": ",".join([*advertised, f"CONTROLLER://127.0.0.1:{controller_port}"]),
        "advertised.listeners": ",".join(advertised),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": ",".join(protocols),
        "log.dirs": str(layout.kraft_dir),
        # One broker: one replica of everything; a cluster: three, two of them in sync.
        "offsets.topic.replication.factor": str(replicas),
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(in_sync),
        "transaction.state.log.num.partitions": "10",
        "share.coordinator.state.topic.replication.factor": str(replicas),
        "share.coordinator.state.topic.min.isr": str(in_sync),
        "default.replication.factor": str(replicas),
        "min.insync.replicas": str(in_sync),
        "num.partitions": "1",
        # Groups form at once instead of waiting 3 s for more members.
        "group.initial.rebalance.delay.ms": "0",
        # The new group protocol (KIP-848) takes these from the broker, not the client: a
        # crashed member leaves in 10 s (not 45) and assignments travel on 1 s heartbeats.
        "group.consumer.session.timeout.ms": "10000",
        "group.consumer.min.session.timeout.ms": "6000",
        "group.consumer.heartbeat.interval.ms": "1000",
        "group.consumer.min.heartbeat.interval.ms": "500",
        # Conveyor creates the topics it needs explicitly.
        "auto.create.topics.enable": "false",
        "delete.topic.enable": "true",
        "num.network.threads": "3",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        "log.retention.hours": "168",
    }
    settings.update(secure_settings or {})
    if role:
        # a restarted node catches up and leads its partitions again without a manual step
        settings["auto.leader.rebalance.enable"] = "true"
        settings["leader.imbalance.check.interval.seconds"] = "10"
    lines = ["# Written by `conveyor broker start`; rewritten on every start."]
    lines += [f"{key}={value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def render_log4j2(layout: BrokerLayout) -> str:
    """Log4j2 configuration: INFO to a rolling ``logs/server.log`` in the data folder."""
    log = layout.server_log
    return f"""Configuration:
  name: conveyor-broker
  Appenders:
    RollingFile:
      name: File
      fileName: "{log}"
      filePattern: "{log}.%i"
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
      Policies:
        SizeBasedTriggeringPolicy:
          size: 20MB
      DefaultRolloverStrategy:
        max: 3
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: File
    Logger:
      - name: kafka.request.logger
        level: WARN
      - name: org.apache.kafka.controller
        level: INFO
"""
