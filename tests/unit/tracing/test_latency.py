"""Stage arithmetic of ``Latency`` on hand-made messages with known times."""

from __future__ import annotations

import pytest

from conveyor import ConfigurationError
from conveyor.instrumentation import Monitor
from conveyor.tracing import PRODUCED_AT, Latency
from conveyor.tracing.latency import PollTimes
from helpers import FakeRaw

LOG_APPEND_TIME, CREATE_TIME = 2, 1


class FixedPolls(PollTimes):
    def __init__(self, times: list[tuple[int, float]]) -> None:
        super().__init__()
        self._fetches.extend(times)


def stamped(offset: int, produced: float, appended: float, kind: int = LOG_APPEND_TIME) -> FakeRaw:
    return FakeRaw(
        offset,
        headers=[(PRODUCED_AT, str(int(produced * 1e6)).encode())],
        timestamp=(kind, int(appended * 1000)),
    )


def test_each_stage_is_the_difference_of_its_two_times() -> None:
    monitor = Monitor()
    latency = Latency(monitor)
    latency.enable()
    events: list[dict] = []
    monitor.subscribe("latency.measured", lambda event: events.append(dict(event)))
    batch = [stamped(0, 100.000, 100.002), stamped(1, 100.001, 100.003)]
    polls = FixedPolls([(0, 100.010), (1, 100.020)])  # fetched one at a time
    latency.consumed("orders", 0, batch, polls, started=100.030, ended=100.050)
    stages = latency.snapshot()["orders"]
    assert stages["produce→append"].mean == pytest.approx(0.002, abs=1e-6)
    assert stages["append→poll"].mean == pytest.approx((0.008 + 0.017) / 2, abs=1e-6)
    assert stages["poll→start"].mean == pytest.approx((0.020 + 0.010) / 2, abs=1e-6)
    assert stages["start→end"].mean == pytest.approx(0.020, abs=1e-6)
    assert stages["start→end"].count == 2
    assert stages["produce→end"].mean == pytest.approx((0.050 + 0.049) / 2, abs=1e-6)
    assert stages["poll→end"].mean == pytest.approx((0.040 + 0.030) / 2, abs=1e-6)
    assert latency.histogram("orders", "poll→end").quantile(0.999) == pytest.approx(0.040, rel=0.05)
    assert "end→commit" not in stages
    assert events[0]["count"] == 2
    assert events[0]["stages"]["start→end"] == pytest.approx(0.020)

    monitor.instrument(
        "offsets.committed", listener="l", group="g", offsets=[("orders", 0, 1)], sync=False,
        duration=0.001, committed_at=100.150,
    )  # fmt: skip
    assert "end→commit" not in latency.snapshot()["orders"], "offset 1 is not past the batch"
    monitor.instrument(
        "offsets.committed", listener="l", group="g", offsets=[("orders", 0, 2)], sync=False,
        duration=0.001, committed_at=100.250,
    )  # fmt: skip
    commit = latency.snapshot()["orders"]["end→commit"]
    assert commit.count == 2
    assert commit.mean == pytest.approx(0.200, abs=1e-6)


def test_create_time_messages_are_measured_from_their_stamp() -> None:
    latency = Latency()
    latency.enable()
    batch = [stamped(0, 50.000, 50.000, kind=CREATE_TIME)]
    latency.consumed("t", 0, batch, FixedPolls([(0, 50.004)]), started=50.005, ended=50.006)
    stages = latency.snapshot()["t"]
    assert "produce→append" not in stages
    assert stages["append→poll"].mean == pytest.approx(0.004, abs=1e-6)


def test_a_revoked_partition_leaves_no_batch_waiting_for_its_commit() -> None:
    monitor = Monitor()
    latency = Latency(monitor)
    latency.enable()
    latency.consumed("t", 0, [FakeRaw(0, timestamp=(1, 1000))], PollTimes(), 1.0, 1.1)
    latency.forget("t", 0)
    monitor.instrument(
        "offsets.committed", listener="l", group="g", offsets=[("t", 0, 1)], sync=True,
        duration=0.0, committed_at=2.0,
    )  # fmt: skip
    assert "end→commit" not in latency.snapshot()["t"]


def test_poll_times_forget_fetches_that_were_consumed() -> None:
    polls = FixedPolls([(4, 1.0), (9, 2.0)])
    assert polls.polled_at(3, default=0.0) == 1.0
    assert polls.polled_at(5, default=0.0) == 2.0
    assert polls.polled_at(10, default=7.0) == 7.0


def test_poll_times_of_lanes_are_kept_until_forgotten() -> None:
    """Lanes finish out of order: a later batch must not make an earlier one's poll time
    unknown; the executor forgets below its committable offset."""
    polls = PollTimes(in_order=False)
    polls._fetches.extend([(4, 1.0), (9, 2.0)])
    assert polls.polled_at(7, default=0.0) == 2.0
    assert polls.polled_at(10, default=0.0) == 0.0
    assert polls.polled_at(2, default=0.0) == 1.0, "still known after a later offset"
    polls.forget_before(5)
    assert polls.polled_at(2, default=0.5) == 2.0, "forgotten: the next fetch's time"


def test_stamp_must_be_a_bool() -> None:
    with pytest.raises(ConfigurationError, match="stamp"):
        Latency().enable(stamp="yes")  # type: ignore[arg-type]


def test_a_malformed_send_stamp_is_ignored() -> None:
    latency = Latency()
    latency.enable()
    huge = [(PRODUCED_AT, b"9" * 400)]  # too large for a float: must not raise
    junk = [(PRODUCED_AT, b"soon")]
    batch = [
        FakeRaw(0, headers=huge, timestamp=(1, 1000)),
        FakeRaw(1, headers=junk, timestamp=(1, 1000)),
    ]
    latency.consumed("t", 0, batch, PollTimes(), 2.0, 2.5)
    assert latency.snapshot()["t"]["produce→end"].count == 2, "measured from the timestamps"
