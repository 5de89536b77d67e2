"""Request-reply over Kafka: results from sync and async handlers, remote errors, unknown
commands, timeouts with clean-up, concurrent callers, reply partitions, closing, expiry."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conveyor import App, Producer, RemoteError, RpcClientClosedError, RpcTimeoutError
from conveyor.rpc import Client, Handlers
from helpers import LoopTicks


@pytest.fixture
def rpc_topics(new_topic) -> tuple[str, str]:
    return new_topic(), new_topic(partitions=2)


def make_server(bootstrap: str, commands: str, results: str, handlers: Handlers) -> App:
    app = App(client_id="rpc-server", kafka={"bootstrap.servers": bootstrap, "group.id": f"rpc-{uuid.uuid4().hex[:6]}"},
              max_wait_time=0.05, concurrency=2)  # fmt: skip
    app.routes.rpc(commands, handlers, results_topic=results)
    return app


@pytest.fixture
def server(kafka_bootstrap: str, rpc_topics: tuple[str, str]) -> Iterator[tuple[App, Handlers]]:
    commands, results = rpc_topics
    handlers = Handlers()
    release = threading.Event()

    @handlers.register("add")
    def add(a: int, b: int) -> int:
        return a + b

    @handlers.register("greet")
    async def greet(name: str, punctuation: str = "!") -> str:
        await asyncio.sleep(0)
        return f"hello {name}{punctuation}"

    @handlers.register("fail")
    def fail() -> None:
        raise ValueError("no can do")

    @handlers.register("slow")
    def slow(seconds: float) -> str:
        release.wait(seconds)  # a handler that outlives its caller's timeout
        return "late"

    app = make_server(kafka_bootstrap, commands, results, handlers)
    assigned = threading.Event()
    app.monitor.subscribe("rebalance.partitions_assigned", lambda _e: assigned.set())
    app.start()
    assert assigned.wait(30)
    yield app, handlers
    release.set()
    app.stop_and_wait()


def test_results_errors_and_unknown_commands(
    kafka_bootstrap: str, rpc_topics: tuple[str, str], server: Any
) -> None:
    commands, results = rpc_topics
    with Client(
        {"bootstrap.servers": kafka_bootstrap}, commands_topic=commands, results_topic=results
    ) as client:
        assert client.call("add", 2, 3) == 5
        assert client.call("greet", "kafka", punctuation="?") == "hello kafka?"
        assert client.call_async("add", 1, 1).result(5) == 2
        with pytest.raises(RemoteError) as remote:
            client.call("fail")
        assert (remote.value.type, remote.value.message) == ("ValueError", "no can do")
        with pytest.raises(RemoteError, match="UnknownCommand"):
            client.call("nope")
        started = time.perf_counter()
        for index in range(20):
            assert client.call("add", index, 1) == index + 1
        assert time.perf_counter() - started < 10
        assert client.pending() == 0


def test_a_timeout_cleans_up_and_the_late_reply_is_discarded(
    kafka_bootstrap: str, rpc_topics: tuple[str, str], server: Any
) -> None:
    commands, results = rpc_topics
    with Client(
        {"bootstrap.servers": kafka_bootstrap}, commands_topic=commands, results_topic=results
    ) as client:
        started = time.monotonic()
        with pytest.raises(RpcTimeoutError):
            client.call("slow", 1.5, timeout=0.5)
        assert 0.45 <= time.monotonic() - started < 1.5
        assert client.pending() == 0
        assert (
            client.call("add", 1, 2, timeout=10) == 3
        )  # the server is free again after the slow call
        deadline = time.monotonic() + 10
        while client.discarded < 1 and time.monotonic() < deadline:
            client.call("add", 0, 0)  # each round trip gives the late reply time to arrive
        assert client.discarded == 1


def test_concurrent_callers_get_their_own_results(
    kafka_bootstrap: str, rpc_topics: tuple[str, str], server: Any
) -> None:
    commands, results = rpc_topics
    outcomes: dict[int, list[int]] = {}
    with Client(
        {"bootstrap.servers": kafka_bootstrap}, commands_topic=commands, results_topic=results
    ) as client:

        def caller(index: int) -> None:
            outcomes[index] = [client.call("add", index * 100, n, timeout=10) for n in range(10)]

        threads = [threading.Thread(target=caller, args=(index,)) for index in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert outcomes == {index: [index * 100 + n for n in range(10)] for index in range(8)}


def test_reply_partition_and_close_with_calls_in_flight(
    kafka_bootstrap: str, rpc_topics: tuple[str, str], server: Any
) -> None:
    commands, results = rpc_topics
    client = Client(
        {"bootstrap.servers": kafka_bootstrap},
        commands_topic=commands,
        results_topic=results,
        reply_partition=1,
    )
    try:
        assert client.call("add", 20, 22) == 42
        waiting = client.call_async("slow", 5, timeout=10)
    finally:
        client.close()
    with pytest.raises(RpcClientClosedError):
        waiting.result(1)
    with pytest.raises(RpcClientClosedError):
        client.call("add", 1, 1)


def test_a_caller_waiting_when_the_client_closes_fails_at_once(
    kafka_bootstrap: str, rpc_topics: tuple[str, str], server: Any
) -> None:
    """The thread reading the results for its own call (the slow one) and a thread waiting
    behind it both end with RpcClientClosedError, not at their timeout."""
    commands, results = rpc_topics
    client = Client(
        {"bootstrap.servers": kafka_bootstrap}, commands_topic=commands, results_topic=results
    )
    outcomes: list[BaseException] = []
    started = threading.Barrier(3)

    def caller(name: str, *args: Any) -> None:
        started.wait(10)
        try:
            client.call(name, *args, timeout=30)
        except BaseException as error:
            outcomes.append(error)

    threads = [
        threading.Thread(target=caller, args=("slow", 20)),
        threading.Thread(target=caller, args=("slow", 20)),
    ]
    for thread in threads:
        thread.start()
    started.wait(10)
    deadline = time.monotonic() + 10
    while client.pending() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert client.pending() == 2
    closed_at = time.monotonic()
    client.close()
    for thread in threads:
        thread.join(10)
    assert time.monotonic() - closed_at < 5
    assert [type(error) for error in outcomes] == [RpcClientClosedError] * 2


def test_async_calls_complete_beside_waiting_callers_and_a_cancelled_one_is_harmless(
    kafka_bootstrap: str, rpc_topics: tuple[str, str], server: Any
) -> None:
    """Replies to call_async come whether a caller reads the results at the moment (it ends
    them on its way) or nobody does (the background reader); a Future cancelled before its
    reply came does not stop the reading."""
    commands, results = rpc_topics
    with Client(
        {"bootstrap.servers": kafka_bootstrap}, commands_topic=commands, results_topic=results
    ) as client:
        cancelled = client.call_async("slow", 0.2, timeout=10)
        assert cancelled.cancel()
        alone = [client.call_async("add", n, 1, timeout=10) for n in range(5)]
        assert [future.result(10) for future in alone] == [1, 2, 3, 4, 5]
        beside = [client.call_async("add", n, 2, timeout=10) for n in range(5)]
        assert client.call("add", 40, 2, timeout=10) == 42
        assert [future.result(10) for future in beside] == [2, 3, 4, 5, 6]
        assert client.call("add", 1, 1, timeout=10) == 2
        assert client.pending() == 0


def test_every_reply_goes_to_the_requested_partition(
    kafka_bootstrap: str, new_topic, read_messages
) -> None:
    """Guards the server's use of ``reply_partition``: with four result partitions and six
    calls, replies that ignored it would spread over the others (and those calls time out)."""
    commands, results = new_topic(), new_topic(partitions=4)
    handlers = Handlers()
    handlers.register("echo")(lambda n: n)
    app = make_server(kafka_bootstrap, commands, results, handlers)
    app.start()
    try:
        with Client(
            {"bootstrap.servers": kafka_bootstrap}, commands_topic=commands,
            results_topic=results, reply_partition=3,
        ) as client:  # fmt: skip
            assert [client.call("echo", n, timeout=20) for n in range(6)] == list(range(6))
    finally:
        app.stop_and_wait()
    replies = read_messages(results, 6, timeout=10)
    assert [reply.partition() for reply in replies] == [3] * 6


def test_a_client_built_from_an_app_shares_its_producer(
    kafka_bootstrap: str, rpc_topics: tuple[str, str], server: Any
) -> None:
    """``Client(app, ...)`` takes the app's kafka settings and sends with the app's producer,
    which stays open when the client closes."""
    commands, results = rpc_topics
    caller = App(client_id="caller", kafka={"bootstrap.servers": kafka_bootstrap})
    sent: list[str] = []
    caller.monitor.subscribe("message.produced_sync", lambda e: sent.append(e["report"].topic))
    caller.monitor.subscribe("message.produced_async", lambda e: sent.append(e["topic"]))
    with Client(caller, commands_topic=commands, results_topic=results) as client:
        assert client.call("add", 2, 3) == 5
    assert sent == [commands], "the request went through the app's producer"
    assert not caller.producer.closed
    caller.producer.close()


def test_expired_requests_are_skipped_and_a_restarted_server_answers(
    kafka_bootstrap: str, rpc_topics: tuple[str, str]
) -> None:
    commands, results = rpc_topics
    handlers = Handlers()
    calls: list[int] = []

    @handlers.register("count")
    def count(n: int) -> int:
        calls.append(n)
        return n

    with Client(
        {"bootstrap.servers": kafka_bootstrap}, commands_topic=commands, results_topic=results
    ) as client:
        with pytest.raises(RpcTimeoutError):
            client.call("count", 1, timeout=0.2)  # no server yet: expires before anyone reads it
        for _ in range(2):  # a server, stopped and started again between calls
            app = make_server(kafka_bootstrap, commands, results, handlers)
            app.start()
            try:
                assert client.call("count", 2, timeout=30) == 2
            finally:
                app.stop_and_wait()
    assert 1 not in calls, "the expired request was not executed"


class ReversedJson:
    """A codec of its own: JSON with the bytes reversed (to prove the codec is used both ways)."""

    def encode(self, value: Any) -> bytes:
        return json.dumps(value).encode()[::-1]

    def decode(self, raw: bytes) -> Any:
        return json.loads(raw[::-1])


def test_a_pluggable_codec(kafka_bootstrap: str, new_topic, read_messages) -> None:
    commands, results = new_topic(), new_topic()
    handlers = Handlers()
    handlers.register("twice")(lambda value: value * 2)
    app = App(client_id="rpc-codec", kafka={"bootstrap.servers": kafka_bootstrap, "group.id": f"codec-{uuid.uuid4().hex[:6]}"},
              max_wait_time=0.05)  # fmt: skip
    app.routes.rpc(commands, handlers, results_topic=results, codec=ReversedJson())
    app.start()
    try:
        with Client({"bootstrap.servers": kafka_bootstrap}, commands_topic=commands, results_topic=results,
                    codec=ReversedJson()) as client:  # fmt: skip
            assert client.call("twice", 21, timeout=30) == 42
    finally:
        app.stop_and_wait()
    [request] = read_messages(commands, 1)
    assert request.value().endswith(b"{"), "the request went out in the custom encoding"


def test_a_result_that_cannot_be_encoded_is_an_error_reply_and_runs_once(
    kafka_bootstrap: str, rpc_topics: tuple[str, str]
) -> None:
    """The handler runs once; the caller gets a RemoteError (not a timeout), and the next call
    on the same commands partition is answered (nothing is retried behind it)."""
    commands, results = rpc_topics
    handlers = Handlers()
    runs: list[str] = []

    @handlers.register("unencodable")
    def unencodable() -> object:
        runs.append("unencodable")
        return {1, 2}  # a set: JSON cannot encode it

    handlers.register("echo")(lambda value: value)
    app = make_server(kafka_bootstrap, commands, results, handlers)
    app.start()
    try:
        with Client(
            {"bootstrap.servers": kafka_bootstrap}, commands_topic=commands, results_topic=results
        ) as client:
            with pytest.raises(RemoteError, match="could not be encoded") as remote:
                client.call("unencodable", timeout=30)
            assert remote.value.type == "TypeError"
            assert client.call("echo", "after", timeout=30) == "after"
    finally:
        app.stop_and_wait()
    assert runs == ["unencodable"]


def test_malformed_requests_are_dropped_and_counted(
    kafka_bootstrap: str, rpc_topics: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """Messages that are not requests are dropped with one rate-limited warning; real requests
    behind them are answered."""
    commands, results = rpc_topics
    handlers = Handlers()
    handlers.register("echo")(lambda value: value)
    app = make_server(kafka_bootstrap, commands, results, handlers)
    responder = app.routes.find(commands)[0].consumer_class
    assert responder is not None
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        producer.produce_many_sync(
            [
                {"topic": commands, "payload": payload}
                for payload in (b"not json", b"[1, 2]", b'{"no": "id"}') * 5
            ]
        )
    app.start()
    try:
        with Client(
            {"bootstrap.servers": kafka_bootstrap}, commands_topic=commands, results_topic=results
        ) as client:
            assert client.call("echo", "behind them", timeout=30) == "behind them"
    finally:
        app.stop_and_wait()
    assert responder.malformed == 15  # type: ignore[attr-defined]
    lines = [r for r in caplog.records if "not an RPC request" in r.getMessage()]
    assert 1 <= len(lines) <= 2, "rate-limited, not one line per message"


def test_awaited_calls_run_side_by_side_on_one_loop(
    server: tuple[App, Handlers], rpc_topics: tuple[str, str]
) -> None:
    """acall: many calls in flight on one event loop, results in order of the calls, a remote
    error raised where it was awaited, and the loop never blocked meanwhile."""
    app, _ = server
    commands, results = rpc_topics

    async def scenario(client: Client) -> tuple[list[Any], int]:
        async with LoopTicks() as ticks:
            sums = await asyncio.gather(*(client.acall("add", n, n, timeout=20) for n in range(50)))
            with pytest.raises(RemoteError, match="no can do"):
                await client.acall("fail", timeout=20)
        return sums, ticks.count

    with Client(app, commands_topic=commands, results_topic=results) as client:
        sums, ticks = asyncio.run(scenario(client))
    assert sums == [2 * n for n in range(50)]
    assert ticks >= 3, "the loop stood still while the calls were in flight"
