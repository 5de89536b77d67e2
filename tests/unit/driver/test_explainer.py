"""The explainer asks whether topics exist on a thread of its own, answers a question that
waited too long "not asked", and leaves nothing unanswered when it closes."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from conveyor.driver import explainer as module
from conveyor.driver.explainer import Explainer


class Answers:
    """What ``then`` was called with, and on which thread; waiters wake on each answer."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.got: list[tuple[dict[str, Any], threading.Thread]] = []

    def __call__(self, verdicts: Any) -> None:
        with self.changed:
            self.got.append((dict(verdicts), threading.current_thread()))
            self.changed.notify_all()

    def wait(self, count: int) -> list[tuple[dict[str, Any], threading.Thread]]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.got) >= count, 10), self.got
            return list(self.got)


def test_questions_are_asked_and_answered_on_the_explainers_thread() -> None:
    asked: list[tuple[str, threading.Thread]] = []

    def missing(topic: str) -> bool:
        asked.append((topic, threading.current_thread()))
        return topic == "gone"

    explainer, answers = Explainer(missing, "p"), Answers()
    try:
        explainer.explain(["gone", "there"], answers)
        [(verdicts, thread)] = answers.wait(1)
        assert verdicts == {"gone": True, "there": False}
        assert thread is not threading.current_thread()
        assert {t for _, t in asked} == {thread}, "asked there, not here"
        assert explainer.wait_idle(5)
    finally:
        explainer.close()


def test_a_question_that_waited_too_long_is_answered_not_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Behind a question the cluster takes long to answer, the next one is not asked once it
    has waited longer than the bound: its report goes on unexplained rather than late."""
    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(module, "time", SimpleNamespace(monotonic=lambda: clock.now))
    release = threading.Event()
    asked: list[str] = []
    in_first = threading.Event()

    def slow(topic: str) -> bool:
        asked.append(topic)
        in_first.set()
        release.wait(10)
        return True

    explainer, answers = Explainer(slow, "p"), Answers()
    try:
        explainer.explain(["first"], answers)
        assert in_first.wait(10)
        explainer.explain(["second"], answers)
        clock.now += module._STALE + 1.0  # the first answer took long
        release.set()
        got = answers.wait(2)
        assert [verdicts for verdicts, _ in got] == [{"first": True}, {"second": None}]
        assert asked == ["first"]
    finally:
        explainer.close()


def test_closing_answers_what_waits_and_what_comes_after() -> None:
    explainer, answers = Explainer(lambda topic: True, "p"), Answers()
    explainer.close()
    explainer.explain(["late"], answers)
    assert answers.got == [({"late": None}, threading.current_thread())], "at once, here"
