"""Whether the topics of timed-out deliveries exist, asked of the cluster on a thread of the
producer's own.

A delivery that timed out may have gone to a topic that does not exist (librdkafka says so only
after ``topic.metadata.propagation.max.ms``): the producer asks the cluster (a metadata request,
up to :data:`EXPLAIN_TIMEOUT`) before the failure is reported, so that the error names the missing
topic and says the message was not written. That request must not run where the report is
served or awaited: an event loop that serves its producer's reports, or awaits them, would
stall for it. So the handle hands the topic here and completes once the answer is in (see
:class:`~conveyor.driver.handles.DeliveryHandle`); the answers serve a topic's other failures
for a moment (a burst's thousand timeouts are explained with one request).

Nothing is held up for long: a question that waited here longer than ``_STALE`` (many topics
timing out at once, a cluster that answers nobody) is answered "not asked", and so is every
question once the producer closes; each is answered within :data:`EXPLAINED_WITHIN`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping

__all__ = ["EXPLAINED_WITHIN", "EXPLAIN_TIMEOUT", "Clarify", "Explainer", "Verdicts"]

_log = logging.getLogger("conveyor.driver")

Verdicts = Mapping[str, bool | None]
"""Per topic: whether the cluster said it does not exist (``None``: not asked)."""

Clarify = Callable[[Iterable[str], Callable[[Verdicts], None]], None]
"""``clarify(topics, then)``: ask whether ``topics`` exist off the calling thread, then call
``then(verdicts)`` (:meth:`Explainer.explain`)."""

EXPLAIN_TIMEOUT = 0.3
"""Seconds the question about one topic may take (a broker that answers does in milliseconds;
one that does not must not hold the report much longer)."""
_STALE = EXPLAIN_TIMEOUT  # a question that waited longer than this is answered "not asked"
EXPLAINED_WITHIN = _STALE + EXPLAIN_TIMEOUT
"""Seconds within which every question is answered, asked or not: how long a timed-out
delivery's report waits for its explanation at most (a loaded machine's scheduling aside)."""
_IDLE = 30.0  # seconds without a question after which the thread ends (the next one starts it)


class Explainer:
    """Asks ``missing(topic)`` for the topics of timed-out deliveries on a thread of its own
    (started on the first question), and calls back with the answers there."""

    def __init__(self, missing: Callable[[str], bool], name: str) -> None:
        self._missing = missing
        self._name = name
        self._changed = threading.Condition()
        self._questions: deque[tuple[float, tuple[str, ...], Callable[[Verdicts], None]]] = deque()
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def explain(self, topics: Iterable[str], then: Callable[[Verdicts], None]) -> None:
        """Ask whether each of ``topics`` exists, and call ``then(verdicts)`` on the
        explainer's thread (here and now, with no verdicts, once it is closed)."""
        asked = tuple(topics)
        with self._changed:
            if not self._closed:
                self._questions.append((time.monotonic(), asked, then))
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name=f"{self._name}-explainer", daemon=True
                    )
                    self._thread.start()
                self._changed.notify_all()
                return
        _answer(then, dict.fromkeys(asked))

    def wait_idle(self, timeout: float) -> bool:
        """Block until every question asked so far was answered (or ``timeout`` seconds);
        True when none is left."""
        with self._changed:
            return self._changed.wait_for(
                lambda: not self._questions and not self._busy, max(0.0, timeout)
            )

    def close(self, timeout: float = 1.0) -> None:
        """Ask nothing more: questions still waiting are answered "not asked" (on its thread,
        waited for up to ``timeout``), later ones at once."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._questions or self._closed, _IDLE)
                if not self._questions:  # closed, or idle: every question was answered
                    self._thread = None
                    return
                asked_at, topics, then = self._questions.popleft()
                self._busy = True
                closed = self._closed
            try:
                fresh = not closed and time.monotonic() - asked_at < _STALE
                _answer(then, {topic: self._ask(topic) if fresh else None for topic in topics})
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    def _ask(self, topic: str) -> bool | None:
        try:
            return self._missing(topic)
        except Exception:  # no answer: the failure is reported without one
            _log.debug("could not ask whether %r exists", topic, exc_info=True)
            return None


def _answer(then: Callable[[Verdicts], None], verdicts: Verdicts) -> None:
    try:
        then(verdicts)
    except Exception:
        _log.exception("completing a timed-out delivery raised")
