"""``conveyor broker``: start, stop, inspect and use the development Kafka broker."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from conveyor.broker import KAFKA_VERSION, DevelopmentBroker, ensure_kafka_jars
from conveyor.broker.cluster import DEFAULT_CLUSTER_PORT, MAX_NODES, LocalCluster
from conveyor.broker.process import DEFAULT_HEAP, DEFAULT_PORT, BrokerStatus
from conveyor.broker.security import SECURITY_USER, client_settings
from conveyor.cli.loading import json_option
from conveyor.cli.output import console, error_console, key_value_table, progress, table
from conveyor.errors import BrokerNotRunningError
from conveyor.masking import mask

__all__ = ["broker"]

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"

_data_dir_option = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The broker's folder (default: $CONVEYOR_BROKER_DIR or ~/.local/share/conveyor/broker).",
)
_port_option = click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="Port of the PLAINTEXT listener on 127.0.0.1.",
)
_timeout_option = click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=120.0,
    show_default=True,
    help="Seconds to wait for the broker to answer (the first start also downloads its jars).",
)


@click.group()
def broker() -> None:
    """The development broker: a real Apache Kafka (KRaft) in a background JVM."""


_node_option = click.option(
    "--node",
    type=click.IntRange(1, MAX_NODES),
    default=None,
    help="Only this node of the local cluster (see --nodes).",
)


@broker.command()
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=None,
    help=f"Port of the PLAINTEXT listener on 127.0.0.1 [default: {DEFAULT_PORT}; for a cluster "
    f"{DEFAULT_CLUSTER_PORT}, node k on port + k - 1]",
)
@_data_dir_option
@_timeout_option
@click.option("--heap", default=DEFAULT_HEAP, show_default=True, help="Maximum JVM heap (-Xmx).")
@click.option(
    "--nodes",
    type=click.IntRange(1, MAX_NODES),
    default=1,
    show_default=True,
    help="More than one: a local cluster (3: three replicas, min.insync.replicas=2), in "
    "~/.local/share/conveyor/cluster unless --data-dir.",
)
@_node_option
@click.option(
    "--security",
    is_flag=True,
    help="Also listen with SASL_PLAINTEXT (port + 1), SASL_SSL (port + 2) and SSL with client "
    "certificates (port + 3); prints the client settings.",
)
def start(
    port: int | None,
    data_dir: Path | None,
    timeout: float,
    heap: str,
    nodes: int,
    node: int | None,
    security: bool,
) -> None:
    """Start the broker (fetching Kafka with Maven the first time) and wait until it answers.

    With --nodes 3, a local cluster of three brokers; with --node K, node K of that cluster
    again (after `conveyor broker stop --node K`). With --security, secure listeners too."""
    if nodes > 1 or node is not None:
        if security:
            raise click.UsageError("--security is for the single broker, not a local cluster")
        _start_cluster(data_dir, nodes, port, timeout, heap, node)
        return
    port = port or DEFAULT_PORT
    development_broker = DevelopmentBroker(data_dir, port=port, heap=heap, security=security)
    with progress(f"Kafka {KAFKA_VERSION} development broker") as report:
        outcome = development_broker.start(timeout=timeout, on_progress=report)
    status = outcome.status
    if outcome.already_running:
        note = "" if status.port == port else f" (not on {port}: stop it first to change the port)"
        console.print(
            f"The development broker is already running at {status.bootstrap_servers}{note} "
            f"(pid {status.pid}, data in {status.data_dir}).",
            highlight=False,
        )
    else:
        console.print(
            f"Kafka {status.version} is ready at [bold]{status.bootstrap_servers}[/] "
            f"(pid {status.pid}, data in {status.data_dir}).",
            highlight=False,
        )
    console.print(f"export {BOOTSTRAP_ENV}={status.bootstrap_servers}", highlight=False)
    if security and not status.secure_ports:
        raise click.ClickException(
            "the broker runs without the secure listeners (it was started without --security): "
            "stop it with `conveyor broker stop` and start it again with --security"
        )
    if status.secure_ports:
        _print_client_settings(development_broker, status)


def _print_client_settings(development_broker: DevelopmentBroker, status: BrokerStatus) -> None:
    """The secure listeners' client settings, secrets masked (in full in clients.json)."""
    material = development_broker.security_material()
    if material is None:
        return
    ways = client_settings(material, status.port)
    saved = development_broker.security_folder / "clients.json"
    saved.write_text(json.dumps(ways, indent=2) + "\n")
    saved.chmod(0o600)
    rows = [
        (way, "\n".join(f"{name}={value}" for name, value in mask(settings).items()))
        for way, settings in ways.items()
    ]
    console.print(table("Secure listeners: librdkafka settings", ["way in", "settings"], rows))
    console.print(
        f"User {SECURITY_USER!r} logs in with PLAIN or SCRAM-SHA-512; OAUTHBEARER takes any "
        "unsecured JWT with a sub and an exp. The settings with their passwords: "
        f"{saved}",
        highlight=False,
    )


@broker.command()
@_data_dir_option
@click.option("--wipe", is_flag=True, help="Also delete the data folder (all topics).")
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=30.0,
    show_default=True,
    help="Seconds to wait for a graceful exit before killing the JVM.",
)
@click.option(
    "--cluster", "whole_cluster", is_flag=True, help="Stop every node of the local cluster."
)
@_node_option
def stop(
    data_dir: Path | None, wipe: bool, timeout: float, whole_cluster: bool, node: int | None
) -> None:
    """Stop the broker and wait for it to exit; data stays unless --wipe.

    --cluster stops every node of the local cluster, --node K only node K (the others go on)."""
    if whole_cluster or node is not None:
        _stop_cluster(data_dir, wipe, timeout, node)
        return
    development_broker = DevelopmentBroker(data_dir)
    with progress("Stopping the development broker"):
        stopped = development_broker.stop(timeout=timeout, wipe=wipe)
    if stopped is None:
        console.print("The development broker is not running.", highlight=False)
    else:
        console.print(
            f"Stopped the broker at {stopped.bootstrap_servers} (pid {stopped.pid}).",
            highlight=False,
        )
    if wipe:
        console.print(f"Deleted {development_broker.data_dir}.", highlight=False)


@broker.command()
@_data_dir_option
@json_option("Print one JSON object instead of a table.")
def status(data_dir: Path | None, as_json: bool) -> None:
    """Show address, pid, version, data folder and uptime, and a local cluster's nodes as a
    table (exit code 3 when nothing runs)."""
    cluster = LocalCluster(data_dir)
    cluster_part: dict[str, Any] | None = None
    if cluster.exists():
        cluster_part = _cluster_status(cluster)
        if not as_json:
            _print_cluster(cluster, cluster_part)
    cluster_running = bool(cluster_part and any(n["running"] for n in cluster_part["nodes"]))
    if data_dir is not None and cluster_part is not None:  # the folder is a cluster's
        if as_json:
            click.echo(json.dumps({"running": cluster_running, "cluster": cluster_part}))
        sys.exit(0 if cluster_running else 3)
    development_broker = DevelopmentBroker(data_dir)
    current = development_broker.status()
    metadata = development_broker.metadata() if current is not None else None
    if as_json:
        document: dict[str, Any] = {"running": current is not None}
        if current is None:
            document["data_dir"] = str(development_broker.data_dir)
        else:
            document.update(
                bootstrap_servers=current.bootstrap_servers,
                pid=current.pid,
                version=current.version,
                data_dir=current.data_dir,
                uptime_seconds=round(current.uptime, 1),
                answering=metadata is not None,
                cluster_id=metadata.cluster_id if metadata else None,
            )
        if cluster_part is not None:
            document["cluster"] = cluster_part
        click.echo(json.dumps(document))
    elif current is None:
        console.print(
            f"The development broker is not running (data folder {development_broker.data_dir}).",
            highlight=False,
        )
    else:
        console.print(
            key_value_table(
                "Development broker",
                [
                    ("address", current.bootstrap_servers),
                    (
                        "state",
                        "[green]answering[/]"
                        if metadata
                        else "[yellow]running, not answering yet[/]",
                    ),
                    ("pid", str(current.pid)),
                    ("version", f"Apache Kafka {current.version} (KRaft)"),
                    ("cluster id", (metadata.cluster_id or "-") if metadata else "-"),
                    ("data folder", current.data_dir),
                    ("uptime", _duration(current.uptime)),
                ],
            )
        )
    if current is None and not cluster_running:
        sys.exit(3)


@broker.command()
@_data_dir_option
@click.option("-n", "--lines", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines (like tail -F).")
def logs(data_dir: Path | None, lines: int, follow: bool) -> None:
    """Print the end of the broker's log."""
    development_broker = DevelopmentBroker(data_dir)
    log = development_broker.layout.server_log
    if not log.exists():
        raise BrokerNotRunningError(
            f"There is no broker log at {log}: the broker in this data folder never started. "
            "Start it with `conveyor broker start`."
        )
    tail = shutil.which("tail")
    if follow and tail:
        os.execv(tail, [tail, "-n", str(lines), "-F", str(log)])
    for line in log.read_text(errors="replace").splitlines()[-lines:]:
        click.echo(line)


@broker.command()
def fetch() -> None:
    """Download Kafka's jars with Maven into the cache (start does this when needed)."""
    with progress(f"Fetching Apache Kafka {KAFKA_VERSION}") as report:
        libs = ensure_kafka_jars(report)
    console.print(f"Apache Kafka {KAFKA_VERSION} jars are in {libs}.", highlight=False)


@broker.command(name="exec", context_settings={"ignore_unknown_options": True})
@_port_option
@_data_dir_option
@_timeout_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_(port: int, data_dir: Path | None, timeout: float, command: tuple[str, ...]) -> None:
    """Run COMMAND with a broker, and stop the broker afterwards if this started it.

    When $KAFKA_BOOTSTRAP_SERVERS is set, COMMAND runs against that Kafka and no broker is
    started. Otherwise the development broker is started (or a running one reused) and its
    address is exported to COMMAND as $KAFKA_BOOTSTRAP_SERVERS. Exits with COMMAND's code.
    Example: conveyor broker exec -- pytest tests/
    """
    environment = dict(os.environ)
    development_broker: DevelopmentBroker | None = None
    started: BrokerStatus | None = None
    if environment.get(BOOTSTRAP_ENV):
        error_console.print(
            f"Using the Kafka at {BOOTSTRAP_ENV}={environment[BOOTSTRAP_ENV]}.", highlight=False
        )
    else:
        development_broker = DevelopmentBroker(data_dir, port=port)
        with progress(f"Kafka {KAFKA_VERSION} development broker") as report:
            outcome = development_broker.start(timeout=timeout, on_progress=report)
        if not outcome.already_running:
            started = outcome.status
        verb = "Reusing the running" if outcome.already_running else "Started the"
        error_console.print(
            f"{verb} development broker at {outcome.status.bootstrap_servers}.", highlight=False
        )
        environment[BOOTSTRAP_ENV] = outcome.status.bootstrap_servers
    try:
        code = subprocess.call(list(command), env=environment)
    finally:
        if development_broker is not None and started is not None:
            with progress("Stopping the development broker this command started"):
                development_broker.stop()
    sys.exit(code)


def _start_cluster(
    data_dir: Path | None, nodes: int, port: int | None, timeout: float, heap: str, node: int | None
) -> None:
    if node is not None:
        cluster = LocalCluster(data_dir, heap=heap)
        with progress(f"Node {node} of the local cluster") as report:
            started = cluster.start_node(node, timeout=timeout, on_progress=report)
        console.print(
            f"Node {node} is ready at [bold]{started.bootstrap_servers}[/] (pid {started.pid}).",
            highlight=False,
        )
        return
    cluster = LocalCluster(data_dir, nodes=nodes, port=port or DEFAULT_CLUSTER_PORT, heap=heap)
    with progress(f"Kafka {KAFKA_VERSION} local cluster of {nodes} nodes") as report:
        cluster.start(timeout=max(timeout, 60.0 * nodes), on_progress=report)
    _print_cluster(cluster, _cluster_status(cluster))
    console.print(f"export {BOOTSTRAP_ENV}={cluster.shape.bootstrap_servers}", highlight=False)


def _stop_cluster(data_dir: Path | None, wipe: bool, timeout: float, node: int | None) -> None:
    cluster = LocalCluster(data_dir)
    if not cluster.exists():
        console.print(f"There is no local cluster in {cluster.root}.", highlight=False)
        return
    if node is not None:
        if wipe:
            raise click.UsageError("--wipe deletes a whole cluster: use it with --cluster")
        with progress(f"Stopping node {node} of the local cluster"):
            stopped = cluster.stop_node(node, timeout=timeout)
        console.print(
            f"Stopped node {node} at {stopped.bootstrap_servers} (pid {stopped.pid}); the "
            "others go on."
            if stopped
            else f"Node {node} of the local cluster is not running.",
            highlight=False,
        )
        return
    with progress("Stopping the local cluster"):
        stopped_nodes = cluster.stop(timeout=timeout, wipe=wipe)
    console.print(f"Stopped {len(stopped_nodes)} node(s) of the local cluster.", highlight=False)
    if wipe:
        console.print(f"Deleted {cluster.root}.", highlight=False)


def _cluster_status(cluster: LocalCluster) -> dict[str, Any]:
    """The cluster's shape and each node's state, as ``status --json`` prints it."""
    shape = cluster.shape
    return {
        "data_dir": str(cluster.root),
        "cluster_id": shape.cluster_id,
        "bootstrap_servers": shape.bootstrap_servers,
        "nodes": [
            {
                "node": number,
                "running": node is not None,
                "address": f"127.0.0.1:{shape.broker_port(number)}",
                "controller_port": shape.controller_port(number),
                "pid": node.pid if node else None,
                "uptime_seconds": round(node.uptime, 1) if node else None,
            }
            for number, node in cluster.nodes()
        ],
    }


def _print_cluster(cluster: LocalCluster, part: dict[str, Any]) -> None:
    rows = [
        (
            str(node["node"]),
            node["address"],
            "[green]running[/]" if node["running"] else "[red]stopped[/]",
            str(node["pid"] or "-"),
            str(node["controller_port"]),
            _duration(node["uptime_seconds"]) if node["running"] else "-",
        )
        for node in part["nodes"]
    ]
    console.print(
        table(
            f"Local cluster {part['cluster_id']} ({cluster.root})",
            ["node", "address", "state", "pid", "controller port", "uptime"],
            rows,
        )
    )


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d {hours}h {minutes}m"
    if hours:
        return f"{hours}h {minutes}m {secs}s"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"
