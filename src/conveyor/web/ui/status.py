"""What the Status page checks, as plain data: the web UI's topics exist with their settings,
processes report, an aggregator publishes, the hosts' clocks agree and the reader reads its
topics; a check that fails says what to do. Nothing here knows HTTP."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from conveyor.admin import Admin, plan
from conveyor.errors import ConveyorError
from conveyor.web.aggregation.fold import DEAD_AFTER_INTERVALS, process_status
from conveyor.web.reading.data import WebData

if TYPE_CHECKING:
    from conveyor.web.ui.host import UiHost

__all__ = ["status_checks"]


def status_checks(
    web: UiHost, data: WebData, admin: Callable[[], Admin], now: float
) -> list[dict[str, Any]]:
    """The checks of the Status page of ``web`` at ``now`` (epoch seconds), each a ``name``,
    whether it is ``ok``, a ``detail`` and, failed, a ``hint``. ``admin`` gives the UI's admin
    client (made on first use: failing to make it fails the topics check)."""
    checks: list[dict[str, Any]] = []

    def check(name: str, ok: bool, detail: str, hint: str = "") -> None:
        checks.append({"name": name, "ok": ok, "detail": detail, "hint": "" if ok else hint})

    try:
        changes = [c for c in plan(admin(), web.topics.declared()) if c.kind != "warning"]
        check(
            "Topics",
            not changes,
            "all the web UI's topics exist with their settings"
            if not changes
            else "; ".join(f"{c.topic}: {c.detail}" for c in changes),
            "run `conveyor web install --app ...` (or `conveyor web migrate` to fix settings)",
        )
    except ConveyorError as exc:
        check(
            "Topics",
            False,
            f"could not ask Kafka: {exc}",
            "is the broker up? is bootstrap.servers right?",
        )
    states = data.states()
    newest = max((float(s.get("reported_at") or 0) for s in states.values()), default=None)
    interval = web.tracking_interval
    check(
        "Reports",
        newest is not None and now - newest <= DEAD_AFTER_INTERVALS * interval,
        "no process has reported yet"
        if newest is None
        else f"the newest report is {now - newest:.1f} s old",
        "call app.web.enable() before app.run(), and run the app (conveyor server)",
    )
    heartbeat = data.heartbeat()
    age = now - float(heartbeat["aggregated_at"]) if heartbeat else None
    check(
        "Aggregator",
        age is not None and age <= DEAD_AFTER_INTERVALS * max(interval, 5.0),
        "no aggregator has published yet"
        if age is None
        else f"last published {age:.1f} s ago by {heartbeat['owner']} ({heartbeat['folded']} reports folded, {heartbeat['malformed']} malformed skipped)",  # type: ignore[index]
        "an app with app.web.enable() or `conveyor web` runs it (consumer group conveyor_web)",
    )
    skews = [
        float(s["received_at"]) - float(s["reported_at"])
        for s in states.values()
        if s.get("received_at") is not None and process_status(s, now) not in ("dead", "stopped")
    ]
    worst = max(skews, key=abs, default=0.0)
    check(
        "Clocks",
        abs(worst) <= 2 * interval,
        f"reports reach the aggregator within {worst:+.2f} s of their time"
        if skews
        else "no live process to compare",
        "a host's clock is off: the dead-process check and the charts rely on it; run NTP",
    )
    check(
        "Reader",
        not data.missing_topics,
        "this UI reads its topics"
        if not data.missing_topics
        else f"missing: {', '.join(data.missing_topics)}",
        "install the topics; the UI retries every few seconds",
    )
    return checks
