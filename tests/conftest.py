"""Fixtures shared by the whole suite: a live Kafka broker and unique, cleaned-up topics.

Integration tests run against ``$KAFKA_BOOTSTRAP_SERVERS`` when it is set (``make test``
sets it through ``conveyor broker exec``); otherwise the session starts the development
broker itself (reusing a running one) and stops it at the end if it started it.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _pytest.nodeid import NodeId
from confluent_kafka import KafkaException, Message
from confluent_kafka.admin import AdminClient

from conveyor import Admin
from conveyor.broker import DevelopmentBroker
from helpers import free_port, read_topic

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"
TESTS = Path(__file__).parent
# The subprocess apps the integration tests start build their App with tests/app_env.py:
# every process this session starts finds it.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(TESTS), os.environ.get("PYTHONPATH"))))
# App reads its settings from CONVEYOR_* variables: a developer's own (a commands key, a
# concurrency, loop serving off) must not change what the tests see, here or in the
# processes they start. Where the development broker keeps its data and jars may stay.
for _name in [n for n in os.environ if n.startswith("CONVEYOR_")]:
    if _name not in ("CONVEYOR_BROKER_DIR", "CONVEYOR_CACHE_DIR"):
        del os.environ[_name]
# The brokers tests start of their own live seconds to minutes: the client compiler and the
# serial collector start one in half the CPU of Kafka's defaults (G1 and the optimising
# compiler), which matters on two shared cores. The session broker keeps Kafka's defaults.
TEST_BROKER_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true"
os.environ.setdefault("KAFKA_JVM_PERFORMANCE_OPTS", TEST_BROKER_JVM)


# Under pytest-xdist (make test: -n WORKERS --dist loadgroup) the tests of one xdist group run
# on one worker, one after the other; each file says its group (``pytestmark``): "brokers"
# for the tests that start brokers of their own (JVMs two cores cannot run many of at once),
# "cluster" for the 3-node cluster and the soak, "docs" for the docs pages (they share plain
# topic names such as "orders", and alter a broker config), "browser" (one Chromium at a
# time), "bench" (the benchmarks' short forms load both cores), "release" (the release check's
# builds and installs), "schemas" and "postgres" (a server each).
_OWN_BROKER = {"own_broker", "own_bootstrap"}
# The longest groups first: xdist hands out work in collection order, and a long group begun
# last would make the run's tail.
_FIRST = ("cluster", "brokers", "bench", "release", "docs", "browser", "schemas", "postgres")


# Test topics carry a uuid's hex (new_topic, and the names the tests give their apps' queues,
# schedules and groups); the session deletes the ones it made that a test left behind (the
# apps' own topics: job queues, schedules, DLQs), or the development broker gathers thousands
# of partitions over many runs and starts and answers slower each time. Only when asked
# (make test sets SWEEP_TEST_TOPICS=1): a session running beside another must not delete the
# other's topics (the mutation harness runs several at once).
_TEST_TOPIC = re.compile(r"[0-9a-f]{6,}")
_TOPICS_BEFORE = pytest.StashKey[frozenset[str]]()


def _session_admin() -> AdminClient | None:
    """An admin client of the session's local broker, or None when none answers (a unit run)."""
    bootstrap = os.environ.get(BOOTSTRAP_ENV, "127.0.0.1:9092")
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    if host not in ("127.0.0.1", "localhost"):
        return None  # somebody else's Kafka: leave its topics alone
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return None
    return AdminClient({"bootstrap.servers": bootstrap})


def pytest_sessionstart(session: pytest.Session) -> None:
    if "PYTEST_XDIST_WORKER" in os.environ or os.environ.get("SWEEP_TEST_TOPICS") != "1":
        return  # the controller sweeps, once all workers are done
    admin = _session_admin()
    if admin is not None:
        with contextlib.suppress(KafkaException):
            topics = admin.list_topics(timeout=10).topics
            session.stash[_TOPICS_BEFORE] = frozenset(topics)


def pytest_sessionfinish(session: pytest.Session) -> None:
    before = session.stash.get(_TOPICS_BEFORE, None)
    admin = _session_admin() if before is not None else None
    if admin is None or before is None:
        return
    with contextlib.suppress(KafkaException):
        left = [
            name
            for name in admin.list_topics(timeout=10).topics
            if name not in before and not name.startswith("__") and _TEST_TOPIC.search(name)
        ]
        if left:
            for future in admin.delete_topics(left, operation_timeout=30).values():
                with contextlib.suppress(KafkaException):
                    future.result(timeout=60)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Everything under tests/integration talks to a real broker; a test that starts a
    broker of its own must say so to xdist (group "brokers"), or the suite refuses to run;
    on an xdist worker under ``--dist loadgroup``, each test's group is put in its id."""
    integration = TESTS / "integration"
    grouping = bool(getattr(config.option, "loadgroup", False))
    if grouping:
        items.sort(key=_start_order)  # stable: the same order on every worker
    for item in items:
        if grouping:
            _group_in_id(item)
        if integration not in Path(str(item.fspath)).parents:
            continue
        item.add_marker(pytest.mark.integration)
        groups = {mark.args[0] for mark in item.iter_markers("xdist_group") if mark.args}
        if _OWN_BROKER & set(getattr(item, "fixturenames", ())) and not groups & {
            "brokers",
            "cluster",
        }:
            raise pytest.UsageError(
                f"{item.nodeid} starts a broker of its own: mark it "
                '@pytest.mark.xdist_group("brokers") (see tests/conftest.py)'
            )


def _start_order(item: pytest.Item) -> int:
    groups = {str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args}
    return min((_FIRST.index(g) for g in groups if g in _FIRST), default=len(_FIRST))


def _group_in_id(item: pytest.Item) -> None:
    """``path::test@group``: how xdist's loadgroup scheduler tells a test's group. xdist 3.8
    writes it to ``item._nodeid``, which pytest 9 no longer reads (its ids are ``NodeId``s),
    so every test was scheduled alone; this writes it where pytest 9 reads it."""
    groups = sorted({str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args})
    if groups and "@" not in item.nodeid:
        item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(groups)}")  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """``bootstrap.servers`` of a live broker for this test session."""
    configured = os.environ.get(BOOTSTRAP_ENV)
    if configured:
        yield configured
        return
    broker = DevelopmentBroker()
    options = os.environ.get("KAFKA_JVM_PERFORMANCE_OPTS")
    if options == TEST_BROKER_JVM:  # the session's broker keeps Kafka's defaults
        del os.environ["KAFKA_JVM_PERFORMANCE_OPTS"]
    try:
        outcome = broker.start()
    finally:
        if options is not None:
            os.environ["KAFKA_JVM_PERFORMANCE_OPTS"] = options
    try:
        yield outcome.status.bootstrap_servers
    finally:
        # Under xdist other workers may still use it; the last one out cannot tell, so leave it.
        if not outcome.already_running and "PYTEST_XDIST_WORKER" not in os.environ:
            broker.stop()


@pytest.fixture(scope="session")
def kafka_admin(kafka_bootstrap: str) -> Iterator[Admin]:
    """Conveyor's admin client, for test set-up."""
    with Admin({"bootstrap.servers": kafka_bootstrap}) as admin:
        yield admin


NewTopicFactory = Callable[..., str]


@pytest.fixture
def new_topic(request: pytest.FixtureRequest, kafka_admin: Admin) -> Iterator[NewTopicFactory]:
    """Create topics with unique names for this test; they are deleted afterwards.

    ``new_topic(partitions=1, config=None) -> name``
    """
    created: list[str] = []
    stem = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name)[:60].strip("-")

    def create(partitions: int = 1, config: dict[str, str] | None = None) -> str:
        name = f"test-{stem}-{uuid.uuid4().hex[:8]}"
        kafka_admin.create_topic(name, partitions, config=config)
        created.append(name)
        return name

    yield create
    for name in created:
        kafka_admin.delete_topic(name)


ReadMessages = Callable[..., list[Message]]


@pytest.fixture
def read_messages(kafka_bootstrap: str) -> ReadMessages:
    """Read ``count`` messages of ``topic`` from the beginning of every partition, without a
    consumer group (bounded by ``timeout`` seconds): ``read_messages(topic, count, **config)``.
    Returns them in partition order, each partition in offset order."""

    def read(topic: str, count: int, timeout: float = 30.0, **config: str) -> list[Message]:
        return read_topic(kafka_bootstrap, topic, count, timeout, **config)

    return read


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[DevelopmentBroker]:
    """A development broker of the test's own (its own port and data folder), for tests that
    stop and start a broker; wiped afterwards."""
    broker = DevelopmentBroker(tmp_path / "broker", port=free_port())
    broker.start()
    yield broker
    broker.stop(wipe=True)


@pytest.fixture
def own_bootstrap(own_broker: DevelopmentBroker) -> str:
    """The bootstrap servers of ``own_broker`` (which the test may also take, to stop it)."""
    status = own_broker.status()
    assert status is not None
    return status.bootstrap_servers
