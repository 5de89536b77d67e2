"""An event loop that serves its producer's delivery reports itself (librdkafka's queue event
on a pipe the loop watches), on a real broker: reports run on the loop's thread, a second loop
and plain threads still get theirs, a blocked loop does not hold a thread's report, closing
the producer lets the loop's pipe go, and the poller (loop serving off) gives the same reports."""

from __future__ import annotations

import asyncio
import threading

import pytest

from conveyor import DeliveryHandle, DeliveryReport, Producer
from conveyor.driver.loop_serving import loop_serving_available

pytestmark = pytest.mark.skipif(
    not loop_serving_available(), reason="librdkafka's queue events are not reachable here"
)


def _report_threads(producer: Producer, topic: str, count: int) -> list[int]:
    """Awaits ``count`` deliveries one by one on a new loop; the threads their callbacks ran on."""
    threads: list[int] = []
    watched = 0

    async def scenario() -> None:
        nonlocal watched
        for n in range(count):
            handle = producer.produce_async(topic=topic, payload=b"%d" % n)
            if not handle.done():  # a callback on a done handle runs here and now: not told
                handle.add_done_callback(lambda _h: threads.append(threading.get_ident()))
                watched += 1
            await handle

    asyncio.run(scenario())
    assert watched >= count // 2
    return threads


def test_an_awaiting_loop_serves_its_own_reports(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        assert producer._client.loop_serving is not None, "this confluent-kafka is supported"
        # Done callbacks of a handle not done yet run where its report is served. The poller
        # serves, every 10 ms, what is queued at that moment (a blocked loop's reports): it
        # may take one now and then, just as it comes.
        here = threading.get_ident()
        threads = _report_threads(producer, topic, 50)
        assert threads.count(here) >= 0.9 * len(threads), "reports served on the loop's thread"
        # a later loop (the first one is closed) takes over
        threads = _report_threads(producer, topic, 20)
        assert threads.count(here) >= 0.9 * len(threads)


def test_reports_slower_than_the_pollers_backstop_are_served_on_the_loop_too(
    kafka_bootstrap: str, new_topic
) -> None:
    """With ``linger.ms`` 20 each report comes well after the poller's 5 ms backstop: the poller
    must not lie in wait for it inside librdkafka while the loop serves."""
    topic = new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 20}) as producer:
        threads = _report_threads(producer, topic, 20)
    assert threads.count(threading.get_ident()) >= 0.9 * len(threads)


def test_switched_off_the_poller_serves_every_report(
    kafka_bootstrap: str, new_topic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVEYOR_LOOP_SERVING", "0")
    topic = new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        assert producer._client.loop_serving is None
        threads = _report_threads(producer, topic, 20)
    assert threads
    assert threading.get_ident() not in threads


def test_a_second_loop_and_a_thread_get_their_reports_while_one_loop_serves(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        serving_loop_ready = threading.Event()
        release = threading.Event()
        second: dict[str, object] = {}

        async def serving() -> int:
            await producer.produce_async(topic=topic, payload=b"first loop")
            serving_loop_ready.set()
            while not release.is_set():  # keeps running (and serving) without blocking
                await asyncio.sleep(0.01)
            # the other loop did not take over (it would have closed this loop's pipe)
            assert producer._client.loop_serving._loop is asyncio.get_running_loop()  # type: ignore[union-attr]
            return (await producer.produce_async(topic=topic, payload=b"first loop again")).offset

        def other_loop() -> None:
            async def scenario() -> list[int]:
                reports = await asyncio.gather(
                    *(producer.produce_async(topic=topic, payload=b"second") for _ in range(20))
                )
                return [report.offset for report in reports]

            second["offsets"] = asyncio.run(scenario())

        first = threading.Thread(target=lambda: second.update(first=asyncio.run(serving())))
        first.start()
        assert serving_loop_ready.wait(15)
        worker = threading.Thread(target=other_loop)
        worker.start()
        worker.join(15)
        assert not worker.is_alive(), "the second loop got its 20 reports"
        # a plain thread's produce_sync and wait() while the first loop serves
        assert producer.produce_sync(topic=topic, payload=b"thread", timeout=10).offset >= 0
        assert producer.produce_async(topic=topic, payload=b"thread 2").wait(10).offset >= 0
        release.set()
        first.join(15)
    assert len(set(second["offsets"])) == 20  # type: ignore[arg-type]
    assert isinstance(second["first"], int)


def test_a_blocked_serving_loop_does_not_hold_another_threads_report(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic()
    with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
        blocked = threading.Event()
        unblock = threading.Event()

        async def blocking() -> None:
            await producer.produce_async(topic=topic, payload=b"attach")
            # Handed over while the loop serves, then the loop blocks: its own report waits,
            # but a thread's must not.
            producer.produce_async(topic=topic, payload=b"loop's, unawaited")
            blocked.set()
            unblock.wait(30)  # blocks the loop's thread on purpose

        loop_thread = threading.Thread(target=lambda: asyncio.run(blocking()))
        loop_thread.start()
        try:
            assert blocked.wait(15)
            # Served while the loop is still blocked (it is unblocked only after this): one
            # that nobody waits for (the poller serves what the loop leaves) and one waited for.
            reported = threading.Event()
            producer.produce_async(topic=topic, payload=b"unwaited").add_done_callback(
                lambda _handle: reported.set()
            )
            assert reported.wait(10), "the poller served the report the blocked loop left"
            report = producer.produce_async(topic=topic, payload=b"thread").wait(10)
            assert not unblock.is_set()
        finally:
            unblock.set()
            loop_thread.join(15)
    assert report.topic == topic


def test_closing_the_producer_lets_the_loops_pipe_go(kafka_bootstrap: str, new_topic) -> None:
    topic = new_topic()

    async def scenario() -> None:
        producer = Producer({"bootstrap.servers": kafka_bootstrap})
        await producer.produce_async(topic=topic, payload=b"x")
        serving = producer._client.loop_serving
        assert serving is not None
        pipe = serving._pipe
        assert pipe is not None
        loop = asyncio.get_running_loop()
        assert loop._selector.get_key(pipe[0]) is not None  # type: ignore[attr-defined]
        producer.close()  # from the loop's own thread: the reader goes at once
        with pytest.raises(KeyError):
            loop._selector.get_key(pipe[0])  # type: ignore[attr-defined]
        assert serving._pipe is None, "the pipe is let go (closed with the reader)"

    asyncio.run(scenario())


def test_closing_from_another_thread_drops_the_reader_on_the_loop(
    kafka_bootstrap: str, new_topic
) -> None:
    topic = new_topic()
    producer = Producer({"bootstrap.servers": kafka_bootstrap})

    async def scenario() -> bool:
        await producer.produce_async(topic=topic, payload=b"x")
        serving = producer._client.loop_serving
        assert serving is not None
        assert serving._pipe is not None
        read = serving._pipe[0]
        loop = asyncio.get_running_loop()
        await asyncio.to_thread(producer.close)
        await asyncio.sleep(0)  # the drop was handed to this loop: it runs now
        for _ in range(100):  # bounded: a few loop iterations at most
            try:
                loop._selector.get_key(read)  # type: ignore[attr-defined]
            except KeyError:
                return True
            await asyncio.sleep(0.01)
        return False

    assert asyncio.run(scenario()), "the loop's reader was dropped on its own thread"


def _produce_every_way(producer: Producer, topic: str) -> tuple[list[tuple[str, int, int]], int]:
    """Every way a report can be served, on one loop: awaited one by one, gathered, a burst
    (``produce_many_async`` with its reports), unawaited with a done callback, and a plain
    thread's ``produce_sync`` while the loop runs, each message labeled by its place. The
    ``(label, partition, offset)`` of each report, in that order, and how many done callbacks
    ran on the loop's thread."""
    on_loop = 0

    async def scenario() -> list[tuple[str, int, int]]:
        nonlocal on_loop
        reports = []
        for n in range(20):
            reports.append(await producer.produce_async(topic=topic, payload=b"a", label=f"a{n}"))
        reports += await asyncio.gather(
            *(producer.produce_async(topic=topic, payload=b"g", label=f"g{n}") for n in range(50))
        )
        burst = [{"topic": topic, "payload": b"b", "label": f"b{n}"} for n in range(50)]
        reports += await producer.produce_many_async(burst, reports=True)
        loop, here = asyncio.get_running_loop(), threading.get_ident()
        unawaited: list[DeliveryReport] = []
        all_in = asyncio.Event()

        def done(handle: DeliveryHandle) -> None:
            nonlocal on_loop
            on_loop += threading.get_ident() == here
            unawaited.append(handle.result())
            if len(unawaited) == 30:
                loop.call_soon_threadsafe(all_in.set)

        for n in range(30):
            producer.produce_async(topic=topic, payload=b"u", label=f"u{n}").add_done_callback(done)
        await asyncio.wait_for(all_in.wait(), 15)
        reports += sorted(unawaited, key=lambda report: report.offset)

        def thread() -> list[DeliveryReport]:
            return [
                producer.produce_sync(topic=topic, payload=b"t", label=f"t{n}", timeout=10)
                for n in range(20)
            ]

        reports += await asyncio.to_thread(thread)
        return [(report.label, report.partition, report.offset) for report in reports]

    return asyncio.run(scenario()), on_loop


def test_the_poller_gives_the_same_reports_as_a_serving_loop(
    kafka_bootstrap: str, new_topic, read_messages, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loop serving changes who serves a report, never which: with it switched off, the same
    messages get the same reports, in the same order, and every one is on the topic once."""
    results = {}
    for serving in (True, False):
        if not serving:
            monkeypatch.setenv("CONVEYOR_LOOP_SERVING", "0")
        topic = new_topic()
        with Producer({"bootstrap.servers": kafka_bootstrap}) as producer:
            assert (producer._client.loop_serving is not None) is serving
            reports, on_loop = _produce_every_way(producer, topic)
        if serving:
            assert on_loop >= 15, "the loop served the unawaited reports"
        else:
            assert on_loop == 0, "the poller served them all"
        sent = [label for label, _partition, _offset in reports]
        assert [offset for _label, _partition, offset in reports] == list(range(170))
        assert {partition for _label, partition, _offset in reports} == {0}
        kinds = [message.value() for message in read_messages(topic, 170, timeout=20)]
        assert kinds == [label[0].encode() for label in sent], "each on the topic once, in order"
        results[serving] = reports
    assert results[False] == results[True]
