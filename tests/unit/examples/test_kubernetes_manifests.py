"""The Kubernetes manifests of ``examples/kubernetes``: every document validated against the
schemas of a pinned Kubernetes version (``kubernetes-validate``, strict: an unknown field
fails), the one kind Kubernetes has no schema for (Kustomization) checked here, and what no
schema sees: the objects naming each other, the grace period against ``shutdown_timeout``, the
environment variables against the ones Conveyor reads, the autoscaler's metric against what
Conveyor exposes."""

from __future__ import annotations

import copy
import re
import time
from pathlib import Path
from typing import Any

import confluent_kafka
import kubernetes_validate
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from conveyor import App
from conveyor.environment import (
    APP_VARIABLES,
    KAFKA_PREFIX,
    OTHER_VARIABLES,
    kafka_from_environment,
)
from conveyor.processing.snapshot import PartitionState, ProcessState, Snapshot

ROOT = Path(__file__).resolve().parents[3]
FOLDER = ROOT / "examples" / "kubernetes"
KUBERNETES_VERSION = "1.33"  # the oldest the manifests promise to work on
OPERATIONS = ROOT / "docs" / "operations"
CONFIGURATION_PAGE = OPERATIONS / "configuration.md"

# The variables Conveyor reads (CONVEYOR_KAFKA_<NAME> apart: any librdkafka setting).
READ = frozenset(v.name for v in (*APP_VARIABLES, *OTHER_VARIABLES) if "<" not in v.name)
# Those the manifests and the deployment docs rely on.
RELIED_ON = frozenset({
    "KAFKA_BOOTSTRAP_SERVERS", "CONVEYOR_CLIENT_ID", "CONVEYOR_INSTANCE_ID",
    "CONVEYOR_CONCURRENCY", "CONVEYOR_SHUTDOWN_TIMEOUT", "CONVEYOR_LOG_LEVEL",
    "CONVEYOR_LOG_FORMAT", "CONVEYOR_COMMANDS_KEY",
})  # fmt: skip
VARIABLE = re.compile(r"\b(?:CONVEYOR_[A-Z0-9_]*[A-Z0-9]|KAFKA_BOOTSTRAP_SERVERS)\b")
DEFAULT_SHUTDOWN_TIMEOUT = 60.0

# Kinds Kubernetes has no schema for, each with its own check below.
KUSTOMIZATION = ("kustomize.config.k8s.io/v1beta1", "Kustomization")
KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "metadata", "namespace", "labels", "resources"}
# The files kustomization.yaml leaves out, and why (the README says so too).
NOT_KUSTOMIZED = {
    "secret.yaml": "placeholders: `kubectl apply -k` must never overwrite the real Secret",
    "deployment.yaml": "the at-least-once alternative to statefulset.yaml, not beside it",
    "hpa.yaml": "needs prometheus-adapter with the rule of prometheus-adapter-rules.yaml",
    "prometheus-adapter-rules.yaml": "belongs in the adapter's configuration, in its namespace",
}


def load(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def manifests() -> list[tuple[str, int, dict[str, Any]]]:
    found = [
        (path.name, index, document)
        for path in sorted(FOLDER.glob("*.y*ml"))
        for index, document in enumerate(load(path))
    ]
    assert len(found) >= 9, f"the manifests of {FOLDER} are missing"
    return found


def the(kind: str, name: str | None = None) -> dict[str, Any]:
    (found,) = [
        document
        for _file, _index, document in manifests()
        if document["kind"] == kind and name in (None, document["metadata"]["name"])
    ]
    return found


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    return list(workload["spec"]["template"]["spec"]["containers"])


def workloads() -> list[dict[str, Any]]:
    return [the("StatefulSet"), the("Deployment")]


@pytest.mark.parametrize(
    "document",
    [pytest.param(d, id=f"{f}#{i}-{d['kind']}") for f, i, d in manifests()],
)
def test_each_document_is_valid_kubernetes_or_a_kind_checked_here(
    document: dict[str, Any],
) -> None:
    kind = (document["apiVersion"], document["kind"])
    if kind == KUSTOMIZATION:
        check_kustomization(document)
        return
    problem = used = ""
    try:
        used = kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:  # the message, not the schema's dump
        where = ".".join(str(part) for part in error.path)
        problem = f"{document['kind']} {document['metadata']['name']}: {where}: {error.message}"
    except kubernetes_validate.SchemaNotFoundError:
        problem = f"{kind}: not a kind of Kubernetes {KUBERNETES_VERSION}: give it a check here"
    assert not problem, problem
    assert used == KUBERNETES_VERSION, "the pinned version's schemas, not an older one's"


def check_kustomization(document: dict[str, Any]) -> None:
    unknown = set(document) - KUSTOMIZATION_FIELDS
    assert not unknown, f"fields this check does not know (add them, with a check): {unknown}"
    listed = document["resources"]
    assert len(listed) == len(set(listed))
    yamls = {path.name for path in FOLDER.glob("*.y*ml")} - {"kustomization.yaml"}
    assert set(listed) <= yamls, "every resource is a file of the folder"
    assert set(listed).isdisjoint(NOT_KUSTOMIZED)
    assert set(listed) | set(NOT_KUSTOMIZED) == yamls, "each file listed, or left out with a why"
    for pair in document.get("labels", []):
        assert not pair.get("includeSelectors"), "selectors of a workload cannot change"


def test_the_validator_refuses_a_misspelled_field_and_a_missing_one() -> None:
    """Strict mode catches a misspelled field here rather than at `kubectl apply`."""
    broken = copy.deepcopy(the("StatefulSet"))
    pod = broken["spec"]["template"]["spec"]
    pod["terminationGracePeriodSecond"] = pod.pop("terminationGracePeriodSeconds")
    with pytest.raises(kubernetes_validate.ValidationError, match="terminationGracePeriodSecond"):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)
    broken = copy.deepcopy(the("StatefulSet"))
    del broken["spec"]["selector"]
    with pytest.raises(kubernetes_validate.ValidationError, match="selector"):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_the_objects_name_each_other() -> None:
    labels = {"app.kubernetes.io/name": "shop"}
    config, secret = the("ConfigMap", "shop-config"), the("Secret")
    for workload in workloads():
        assert workload["spec"]["selector"]["matchLabels"] == labels
        assert workload["spec"]["template"]["metadata"]["labels"] == labels
        (container,) = containers(workload)
        sources = [ref.get("configMapRef") or ref["secretRef"] for ref in container["envFrom"]]
        assert [source["name"] for source in sources] == [
            config["metadata"]["name"], secret["metadata"]["name"],
        ]  # fmt: skip
        # the probes and the ports are those `conveyor server` is told to serve on
        command = container["command"]
        assert command[:4] == ["conveyor", "server", "--app", "shop.app:app"]
        ports = {port["name"]: port["containerPort"] for port in container["ports"]}
        assert ports == {
            "health": int(command[command.index("--liveness-port") + 1]),
            "metrics": int(command[command.index("--metrics-port") + 1]),
        }
        assert command[command.index("--liveness-host") + 1] == "0.0.0.0"
        assert command[command.index("--metrics-host") + 1] == "0.0.0.0"
        for probe in ("startupProbe", "livenessProbe"):
            assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}
        assert "readinessProbe" not in container, "nothing sends traffic to a consumer"
    service = the("Service")
    assert the("StatefulSet")["spec"]["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None", "a StatefulSet's Service is headless"
    assert service["spec"]["selector"] == labels
    assert {port["targetPort"] for port in service["spec"]["ports"]} == {"health", "metrics"}
    assert the("PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == labels
    target = the("HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
    assert the(target["kind"], target["name"])["apiVersion"] == target["apiVersion"]


def test_the_grace_period_covers_a_graceful_stop() -> None:
    timeout = float(
        the("ConfigMap", "shop-config")["data"].get(
            "CONVEYOR_SHUTDOWN_TIMEOUT", DEFAULT_SHUTDOWN_TIMEOUT
        )
    )
    for workload in workloads():
        grace = workload["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        # the batches get shutdown_timeout; commits, flushes and leaving the group come after
        assert grace >= timeout + 15, f"{workload['kind']}: SIGKILL {grace} s after SIGTERM"


def test_only_the_statefulset_names_its_instances_after_its_pods() -> None:
    """A StatefulSet pod's name survives its restarts (a transactional.id that fences its
    predecessor); a Deployment pod's does not, so the Deployment sets no instance id."""
    (container,) = containers(the("StatefulSet"))
    (instance,) = [v for v in container["env"] if v["name"] == "CONVEYOR_INSTANCE_ID"]
    assert instance["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    (container,) = containers(the("Deployment"))
    assert "CONVEYOR_INSTANCE_ID" not in {v["name"] for v in container.get("env", [])}
    assert "CONVEYOR_INSTANCE_ID" not in the("ConfigMap", "shop-config")["data"]


def test_the_secret_holds_placeholders_only() -> None:
    values = the("Secret")["stringData"]
    assert values, "stringData: readable placeholders, not base64"
    assert "data" not in the("Secret")
    assert all(value.startswith("CHANGE-ME") for value in values.values()), values


def variables_used() -> set[str]:
    """Every variable name in the folder, comments included (options shown commented out)."""
    return {
        name
        for path in sorted(FOLDER.iterdir())
        if path.suffix in (".yaml", ".yml", ".md")
        for name in VARIABLE.findall(path.read_text())
    }


def test_the_variables_are_the_ones_conveyor_reads() -> None:
    assert RELIED_ON <= READ, f"no longer read: {sorted(RELIED_ON - READ)}"
    used = variables_used()
    assert {"KAFKA_BOOTSTRAP_SERVERS", "CONVEYOR_INSTANCE_ID", "CONVEYOR_COMMANDS_KEY"} <= used
    unknown = {n for n in used if n not in READ and not n.startswith(KAFKA_PREFIX)}
    assert not unknown, f"not variables Conveyor reads: {sorted(unknown)}"
    data = {**the("ConfigMap", "shop-config")["data"], **the("Secret")["stringData"]}
    assert set(data) <= used
    assert data["CONVEYOR_LOG_FORMAT"] in ("text", "json")
    assert data["CONVEYOR_LOG_LEVEL"] in ("DEBUG", "INFO", "WARNING", "ERROR")


def test_the_variables_are_on_the_configuration_page() -> None:
    page = CONFIGURATION_PAGE.read_text()
    missing = {
        name
        for name in variables_used() | RELIED_ON
        if not name.startswith(KAFKA_PREFIX) and name not in page
    }
    assert not missing, f"used here, not on {CONFIGURATION_PAGE.name}: {sorted(missing)}"
    assert "CONVEYOR_KAFKA_" in page


def librdkafka_knows(name: str) -> bool:
    """Whether ``name`` is a librdkafka setting, without making a client: a setting no
    librdkafka has always comes second, so the configuration fails before a client is made,
    at the first of the two that librdkafka does not know (or at a bad value of ``name``)."""
    try:
        confluent_kafka.Consumer({"group.id": "probe", name: "0", "conveyor.no.such": "0"})
    except confluent_kafka.KafkaException as error:
        return f'No such configuration property: "{name}"' not in error.args[0].str()
    raise AssertionError("a configuration with an unknown setting was accepted")


def test_each_conveyor_kafka_variable_names_a_librdkafka_setting() -> None:
    names = sorted(n for n in variables_used() if n.startswith(KAFKA_PREFIX))
    assert "CONVEYOR_KAFKA_SASL_PASSWORD" in names
    # named as Conveyor names them when it reads the environment
    settings = {v: s for s, (_, v) in kafka_from_environment(dict.fromkeys(names, "x")).items()}
    assert settings["CONVEYOR_KAFKA_GROUP_INSTANCE_ID"] == "group.instance.id"
    assert not librdkafka_knows("sasl.pasword"), "the probe tells a typo"
    unknown = {n: s for n, s in settings.items() if not librdkafka_knows(s)}
    assert not unknown, f"no such librdkafka setting: {unknown}"


def exposed_lag_series() -> list[Any]:
    """The lag series an app exposes for one assigned partition (its real collector, fed a
    snapshot)."""
    app = App(client_id="shop", kafka={"bootstrap.servers": "127.0.0.1:9092"})
    process = ProcessState(pid=1, hostname="shop-0", started_at=time.time(), state="running")
    partition = PartitionState(
        listener="shop-1", consumer_group="shop", topic="shop-orders", partition=2,
        consumer="OrdersConsumer", committed=10, marked=10, high_watermark=25, lag=15,
        pending=0, paused=False, retrying=False, attempt=0,
    )  # fmt: skip
    snapshot = Snapshot(time.time(), process, (), (partition,), (), None)
    app.snapshot = lambda: snapshot  # type: ignore[method-assign]
    app.metrics.enable()
    try:
        text = app.metrics.exposition().decode()
    finally:
        app.metrics.disable()
    return [
        sample
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "conveyor_consumer_lag_messages"
    ]


def test_the_autoscaler_scales_on_the_lag_conveyor_exposes() -> None:
    (rule,) = yaml.safe_load(the("ConfigMap", "prometheus-adapter")["data"]["config.yaml"])[
        "externalRules"
    ]
    metric = the("HorizontalPodAutoscaler")["spec"]["metrics"][0]["external"]["metric"]
    assert metric["name"] == rule["name"]["as"]
    (sample,) = exposed_lag_series()
    assert sample.labels == {"consumer_group": "shop", "topic": "shop-orders", "partition": "2"}
    assert sample.value == 15
    series = re.fullmatch(r"(\w+)\{(.*)\}", rule["seriesQuery"])
    assert series is not None
    assert re.fullmatch(rule["name"]["matches"], series[1])
    assert series[1] == sample.name
    matched = set(re.findall(r"(\w+)!=", series[2])) - {"namespace"}  # added by Prometheus
    grouped = {
        label.strip()
        for labels in re.findall(r"by \(([^)]*)\)", rule["metricsQuery"])
        for label in labels.split(",")
    }
    assert matched | grouped | set(metric["selector"]["matchLabels"]) <= set(sample.labels)
    assert rule["resources"]["overrides"] == {"namespace": {"resource": "namespace"}}


def test_the_deployment_page_shows_the_adapter_rule_of_the_example() -> None:
    configuration = yaml.safe_load(the("ConfigMap", "prometheus-adapter")["data"]["config.yaml"])
    page = (OPERATIONS / "deployment.md").read_text()
    shown = [
        yaml.safe_load(block)
        for block in re.findall(r"^```yaml\n(.*?)^```$", page, re.MULTILINE | re.DOTALL)
        if "externalRules" in block
    ]
    assert shown == [configuration]


def test_the_autoscaler_stops_at_the_partitions() -> None:
    """A partition is consumed by one member at a time: pods beyond the group's partitions
    would be idle however long the lag."""
    from shop.app import app  # noqa: PLC0415 - the examples folder is on the path from here

    hpa = the("HorizontalPodAutoscaler")["spec"]
    group = hpa["metrics"][0]["external"]["metric"]["selector"]["matchLabels"]["consumer_group"]
    routes = [route for route in app.routes if route.consumer_group == group]
    assert routes, f"no route of the shop is in consumer group {group}"
    most = max(route.partitions for route in routes)
    assert 1 <= hpa["minReplicas"] <= hpa["maxReplicas"] <= most
    for workload in workloads():
        assert workload["spec"]["replicas"] <= most
