"""The poller thread serves a client's callbacks; when it has nothing in flight it parks, and a
waiting caller serves its own callbacks instead (leader), never two pollers at once."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from conveyor.driver import poller as poller_module
from conveyor.driver.poller import Poller

if TYPE_CHECKING:
    from unit.conftest import YoungClock


class FakeClient:
    """librdkafka's poll() over a queue of callbacks: blocks until one is queued (or the
    timeout), runs the queued ones in the polling thread; records who polled, and whether two
    threads ever polled at once."""

    def __init__(self) -> None:
        self.events: deque[Callable[[], None]] = deque()
        self.changed = threading.Condition()
        self.polling = 0
        self.overlaps = 0
        self.pollers: set[str] = set()
        self.in_flight = 0

    def queue(self, event: Callable[[], None]) -> None:
        with self.changed:
            self.events.append(event)
            self.changed.notify_all()

    def poll(self, timeout: float) -> int:
        with self.changed:
            self.polling += 1
            self.overlaps += self.polling > 1
            self.pollers.add(threading.current_thread().name)
            self.changed.wait_for(lambda: bool(self.events), timeout)
            ready = list(self.events)
            self.events.clear()
        try:
            for event in ready:
                event()
            return len(ready)
        finally:
            with self.changed:
                self.polling -= 1


def idle_poller(client: FakeClient) -> Poller:
    poller = Poller(client, "poller-under-test", idle=lambda: client.in_flight == 0)
    deadline = time.monotonic() + 5
    while not poller.parked and time.monotonic() < deadline:
        time.sleep(0.001)  # waiting for the thread under test to reach its parked state
    assert poller.parked
    return poller


def test_a_waiter_leads_when_the_poller_is_parked() -> None:
    client = FakeClient()
    poller = idle_poller(client)
    served_by: list[str] = []
    done = threading.Event()
    try:
        client.in_flight = 1
        threading.Timer(
            0.05,
            lambda: client.queue(
                lambda: (served_by.append(threading.current_thread().name), done.set())
            ),
        ).start()
        assert poller.lead(done.is_set, time.monotonic() + 5) is True
        assert served_by == [threading.current_thread().name], "served in the waiting thread"
        assert client.overlaps == 0
    finally:
        poller.stop()


def test_no_lead_while_the_poller_polls() -> None:
    client = FakeClient()
    client.in_flight = 1  # something in flight: the poller polls instead of parking
    poller = Poller(client, "busy-poller", idle=lambda: client.in_flight == 0)
    try:
        deadline = time.monotonic() + 5
        while "busy-poller" not in client.pollers and time.monotonic() < deadline:
            time.sleep(0.001)
        assert poller.lead(lambda: False, time.monotonic() + 1) is False
        done = threading.Event()
        client.queue(done.set)
        assert done.wait(5), "the poller serves it"
    finally:
        poller.stop()


def test_a_new_poller_polls_at_once_on_a_machine_booted_just_now(
    monkeypatch: pytest.MonkeyPatch, young_clock: YoungClock
) -> None:
    """Nobody served the queue yet: no backstop keeps a new poller out, however young the
    clock."""
    young_clock.seen_by(poller_module)
    monkeypatch.setattr(poller_module, "_BACKSTOP", 60.0)  # longer than the machine is up
    client = FakeClient()
    client.in_flight = 1  # work in flight: the poller polls at once
    done = threading.Event()
    client.queue(done.set)
    poller = Poller(client, "young-poller", idle=lambda: client.in_flight == 0)
    try:
        assert done.wait(5), "the poller serves it"
    finally:
        poller.stop()


def test_only_one_leader_and_the_poller_stays_out() -> None:
    client = FakeClient()
    poller = idle_poller(client)
    first_done = threading.Event()
    entered = threading.Event()
    results: list[bool] = []

    def first() -> None:
        entered.set()
        results.append(poller.lead(first_done.is_set, time.monotonic() + 5))

    try:
        client.in_flight = 1
        leader = threading.Thread(target=first)
        leader.start()
        assert entered.wait(5)
        time.sleep(0.05)  # let the leader settle into its poll
        assert poller.lead(lambda: False, time.monotonic() + 1) is False, "one leader at a time"
        client.queue(first_done.set)
        leader.join(5)
        assert results == [True]
        assert client.overlaps == 0, "the poller never polled beside the leader"
        assert "poller-under-test" not in client.pollers or client.overlaps == 0
    finally:
        poller.stop()


def test_wake_sends_a_parked_poller_back_to_work() -> None:
    client = FakeClient()
    poller = idle_poller(client)
    done = threading.Event()
    try:
        client.in_flight = 1
        client.queue(done.set)
        poller.wake()
        assert done.wait(5)
        assert "poller-under-test" in client.pollers
    finally:
        poller.stop()


def test_the_poller_stays_out_while_another_thread_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While another thread keeps serving the queue (note_served), the poller does not poll:
    an event queued then waits until that serving stops, and is then served by the poller."""
    # The backstop widened from 5 ms: on a loaded machine the serving thread's 1 ms naps
    # overslept it now and then, and the poller rightly came back in such a gap.
    monkeypatch.setattr(poller_module, "_BACKSTOP", 0.2)
    client = FakeClient()
    client.in_flight = 1  # work in flight: left alone, the poller would poll at once
    poller = Poller(client, "backstopped", idle=lambda: client.in_flight == 0)
    served_at: list[float] = []
    serving = threading.Event()
    serving.set()

    def serve_elsewhere() -> None:
        while serving.is_set():
            poller.note_served()
            time.sleep(0.001)  # a producing thread serving as it goes

    helper = threading.Thread(target=serve_elsewhere)
    try:
        helper.start()
        time.sleep(0.25)  # longer than one poll slice: the poller's current poll has ended
        client.queue(lambda: served_at.append(time.monotonic()))
        time.sleep(0.2)
        stopped = time.monotonic()
        serving.clear()
        helper.join(5)
        deadline = time.monotonic() + 5
        while not served_at and time.monotonic() < deadline:
            time.sleep(0.001)
        assert served_at, "the poller takes over once nobody else serves"
        assert served_at[0] >= stopped, "nothing was polled while another thread served"
        assert client.overlaps == 0
    finally:
        serving.clear()
        poller.stop()
