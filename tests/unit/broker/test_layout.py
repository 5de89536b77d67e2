"""The broker's configuration suits one machine: loopback only, one replica, no auto-creation."""

from __future__ import annotations

from pathlib import Path

import pytest

from conveyor.broker.cluster import ClusterShape
from conveyor.broker.layout import (
    BrokerLayout,
    NodeRole,
    default_data_dir,
    render_server_properties,
)
from conveyor.broker.process import jvm_performance_options, min_heap
from conveyor.broker.security import SecurityMaterial, security_ports, security_properties


def _properties(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return dict(pairs)


def test_server_properties_for_a_single_local_node(tmp_path: Path) -> None:
    layout = BrokerLayout(tmp_path)
    settings = _properties(render_server_properties(layout, port=19092, controller_port=19093))
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert settings["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19092"
    assert settings["process.roles"] == "broker,controller"
    assert settings["controller.quorum.voters"] == "1@127.0.0.1:19093"
    assert settings["auto.create.topics.enable"] == "false"
    assert settings["group.initial.rebalance.delay.ms"] == "0"
    assert settings["group.consumer.session.timeout.ms"] == "10000"  # KIP-848 groups, 10 s
    assert settings["offsets.topic.replication.factor"] == "1"
    assert settings["transaction.state.log.replication.factor"] == "1"
    assert settings["log.dirs"] == str(tmp_path / "kraft")


def test_data_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CONVEYOR_BROKER_DIR", str(tmp_path / "b"))
    assert default_data_dir() == tmp_path / "b"
    monkeypatch.delenv("CONVEYOR_BROKER_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_data_dir() == tmp_path / "conveyor" / "broker"


@pytest.mark.parametrize(
    ("heap", "initial"),
    [("512m", "128m"), ("2g", "512m"), ("128m", "64m"), ("1500000k", "1500000k")],
)
def test_initial_heap_is_a_quarter_of_the_maximum(heap: str, initial: str) -> None:
    assert min_heap(heap) == initial


def test_the_broker_jvm_takes_kafkas_defaults_unless_the_environment_says_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KAFKA_JVM_PERFORMANCE_OPTS", raising=False)
    assert "-XX:+UseG1GC" in jvm_performance_options()
    monkeypatch.setenv("KAFKA_JVM_PERFORMANCE_OPTS", " -XX:+UseSerialGC  -Dx='a b' ")
    assert jvm_performance_options() == ["-XX:+UseSerialGC", "-Dx=a b"]
    monkeypatch.setenv("KAFKA_JVM_PERFORMANCE_OPTS", "  ")
    assert "-XX:+UseG1GC" in jvm_performance_options()


def test_a_cluster_node_votes_in_the_quorum_and_keeps_three_replicas(tmp_path: Path) -> None:
    voters = "1@127.0.0.1:19192,2@127.0.0.1:19193,3@127.0.0.1:19194"
    text = render_server_properties(
        BrokerLayout(tmp_path), port=19093, controller_port=19193, role=NodeRole(2, voters, 3)
    )
    settings = _properties(text)
    assert settings["node.id"] == "2"
    assert settings["controller.quorum.voters"] == voters
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:19093,CONTROLLER://127.0.0.1:19193"
    for name in (
        "default.replication.factor",
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
    ):
        assert settings[name] == "3", name
    assert settings["min.insync.replicas"] == "2"
    assert settings["transaction.state.log.min.isr"] == "2"


def test_a_cluster_shape_places_each_node_on_its_ports() -> None:
    shape = ClusterShape(nodes=3, port=19092, cluster_id="x")
    assert [shape.broker_port(n) for n in (1, 2, 3)] == [19092, 19093, 19094]
    assert [shape.controller_port(n) for n in (1, 2, 3)] == [19192, 19193, 19194]
    assert shape.voters == "1@127.0.0.1:19192,2@127.0.0.1:19193,3@127.0.0.1:19194"
    assert shape.bootstrap_servers == "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094"


def test_secure_listeners_are_added_beside_plaintext(tmp_path: Path) -> None:
    material = SecurityMaterial(str(tmp_path), "store-pw", "user-pw")
    text = render_server_properties(
        BrokerLayout(tmp_path), 29092, 29192, None, security_ports(29092),
        security_properties(material),
    )  # fmt: skip
    lines = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    assert lines["advertised.listeners"] == (
        "PLAINTEXT://127.0.0.1:29092,SASL_PLAINTEXT://127.0.0.1:29093,"
        "SASL_SSL://127.0.0.1:29094,SSL://127.0.0.1:29095"
    )
    assert "CONTROLLER://127.0.0.1:29192" in lines["listeners"]
    assert "SSL:SSL" in lines["listener.security.protocol.map"]
    assert lines["inter.broker.listener.name"] == "PLAINTEXT"
    assert lines["listener.name.ssl.ssl.client.auth"] == "required"
    assert 'user_conveyor="user-pw"' in lines["listener.name.sasl_ssl.plain.sasl.jaas.config"]
    assert lines["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-512,OAUTHBEARER"
